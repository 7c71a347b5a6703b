//! Signing in to NATS as the contracts let a URL say it: `nats://USER:PASSWORD@HOST:PORT`, a
//! token as `nats://TOKEN@HOST:PORT`, or a credentials file (`--nats-creds`, a JWT and its
//! seed); `tls://` for TLS. async-nats reads no credentials from a URL itself, so they are
//! taken out of it here and given to it as options ([`options`]); and a URL is only ever shown
//! with them hidden ([`shown`]).

use std::path::Path;

use async_nats::ConnectOptions;
use percent_encoding::percent_decode_str;

/// The options that sign in as `url` and `creds` say, and `url` without its credentials (to
/// connect to).
pub async fn options(url: &str, creds: Option<&Path>) -> Result<(ConnectOptions, String), String> {
    let mut parsed = url::Url::parse(url).map_err(|e| format!("{}: {e}", shown(url)))?;
    let decoded = |text: &str| percent_decode_str(text).decode_utf8_lossy().into_owned();
    let user = decoded(parsed.username());
    let password = parsed.password().map(decoded);
    let options = match creds {
        Some(path) => ConnectOptions::with_credentials_file(path)
            .await
            .map_err(|e| format!("{}: {e}", path.display()))?,
        None => ConnectOptions::new(),
    };
    let options = match (user.is_empty(), password) {
        (true, None) => options,
        (_, Some(password)) => options.user_and_password(user, password),
        (false, None) => options.token(user),
    };
    // Only a URL with a host has credentials to take out; the setters cannot fail then.
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    Ok((options, parsed.to_string()))
}

/// `url` as messages and logs may show it: a user, password or token in it hidden.
pub fn shown(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.has_host() => {
            if !parsed.username().is_empty() || parsed.password().is_some() {
                let _ = parsed.set_password(None);
                let _ = parsed.set_username("hidden");
            }
            parsed.to_string()
        }
        // Not a URL with a host: whatever comes before an `@` may be a secret.
        _ => match url.rsplit_once('@') {
            Some((_, host)) => format!("hidden@{host}"),
            None => url.to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn credentials_leave_the_url_and_never_show() {
        let (_, bare) = options("nats://lu:S3cr%40t@127.0.0.1:4222", None)
            .await
            .unwrap();
        assert_eq!(bare, "nats://127.0.0.1:4222");
        let (_, bare) = options("tls://T0ken@127.0.0.1:4222", None).await.unwrap();
        assert_eq!(bare, "tls://127.0.0.1:4222");
        let (_, bare) = options("nats://127.0.0.1:4222", None).await.unwrap();
        assert_eq!(bare, "nats://127.0.0.1:4222");
        assert_eq!(
            shown("nats://lu:S3cr3t@127.0.0.1:4222"),
            "nats://hidden@127.0.0.1:4222"
        );
        assert_eq!(
            shown("nats://T0ken@127.0.0.1:4222"),
            "nats://hidden@127.0.0.1:4222"
        );
        assert_eq!(shown("nats://127.0.0.1:4222"), "nats://127.0.0.1:4222");
        assert!(!shown("lu:S3cr3t@not a url").contains("S3cr3t"));
    }

    /// A real nats-server that asks for a user and password (or a token) takes the ones in
    /// the URL, and refuses the same URL without them.
    #[tokio::test]
    async fn a_server_that_asks_for_credentials_takes_those_of_the_url() {
        for (flags, with) in [
            (vec!["--user", "lu", "--pass", "S3cr3t"], "lu:S3cr3t"),
            (vec!["--auth", "T0ken"], "T0ken"),
        ] {
            let port = crate::ports::free_port().expect("a free port");
            let mut server = std::process::Command::new("nats-server")
                .args(["-a", "127.0.0.1", "-p", &port.to_string()])
                .args(&flags)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("nats-server (deploy/test.sh installs it)");
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_err()
            {
                assert!(std::time::Instant::now() < deadline, "NATS did not start");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            let connect = |url: String| async move {
                let (options, bare) = options(&url, None).await.unwrap();
                options.connect(bare.as_str()).await
            };
            let signed_in = connect(format!("nats://{with}@127.0.0.1:{port}")).await;
            let anonymous = connect(format!("nats://127.0.0.1:{port}")).await;
            let _ = server.kill();
            let _ = server.wait();
            assert!(signed_in.is_ok(), "{flags:?}: {:?}", signed_in.err());
            assert!(anonymous.is_err(), "{flags:?}: let in without credentials");
        }
    }
}
