//! The answer to a request head the node cannot parse (a bad request line or header, a URI
//! or a head too long) is hyper's own: a status and an empty body, written before any route
//! runs. The contract promises every error a JSON body with its code, so such an answer is
//! rewritten on its way out ([`rewrite`]). Only hyper writes a 400, 414 or 431 with no body:
//! every answer of the API's own carries one.

/// The contract's answer for `written`, when `written` is the whole of hyper's answer to a
/// head it could not parse.
pub fn rewrite(written: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(written).ok()?;
    let status = text.strip_prefix("HTTP/1.1 ")?.get(..3)?;
    let (reason, code, message) = match status {
        "400" => (
            "Bad Request",
            "bad_request",
            "the request line or a header is malformed",
        ),
        "414" => ("URI Too Long", "too_large", "the request's URI is too long"),
        "431" => (
            "Request Header Fields Too Large",
            "too_large",
            "the request's headers are too large or too many",
        ),
        _ => return None,
    };
    let head = text.strip_suffix("\r\n\r\n")?;
    let empty = head
        .split("\r\n")
        .any(|line| line.eq_ignore_ascii_case("content-length: 0"));
    let typed = head
        .split("\r\n")
        .any(|line| line.to_ascii_lowercase().starts_with("content-type:"));
    if !empty || typed {
        return None;
    }
    let body = serde_json::json!({"error": {"code": code, "message": message}}).to_string();
    Some(
        format!(
            "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hypers_empty_answers_get_the_contracts_body() {
        let hyper = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Sun, 06 Dec 2026 10:00:00 GMT\r\n\r\n";
        let answer = String::from_utf8(rewrite(hyper).unwrap()).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 431 "), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["code"], "too_large");
        let bad = rewrite(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n").unwrap();
        assert!(String::from_utf8(bad)
            .unwrap()
            .contains(r#""code":"bad_request""#));
    }

    #[test]
    fn the_apis_own_answers_pass_as_they_are() {
        for written in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 60\r\n\r\n"[..],
            b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n",
            b"{\"error\":{}}",
        ] {
            assert_eq!(rewrite(written), None, "{}", String::from_utf8_lossy(written));
        }
    }
}
