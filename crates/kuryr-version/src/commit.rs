//! A commit id handed in from outside (`KURYR_GIT_COMMIT`), made fit for a version line. Compiled into
//! build.rs (which uses it) and into the library's tests (which check it).

/// Length of the short commit id (`git rev-parse --short=7`, as the image tag uses).
pub const SHORT: usize = 7;

/// Trimmed; a longer hex id (the image build passes the full `REVISION`) cut to [`SHORT`] characters;
/// `None` when empty or holding characters that have no place in a version line.
pub fn normalize(text: &str) -> Option<String> {
    let t = text.trim();
    let fits = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+');
    if t.is_empty() || t.len() > 64 || !t.chars().all(fits) {
        return None;
    }
    if t.len() > SHORT && t.chars().all(|c| c.is_ascii_hexdigit()) {
        return Some(t[..SHORT].to_ascii_lowercase());
    }
    Some(t.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_ids_are_shortened_and_odd_text_refused() {
        assert_eq!(
            normalize("939500a1b2c3d4e5f60718293a4b5c6d7e8f9012\n").as_deref(),
            Some("939500a")
        );
        assert_eq!(normalize("939500a").as_deref(), Some("939500a"));
        assert_eq!(normalize(" unknown ").as_deref(), Some("unknown"));
        assert_eq!(
            normalize("v0.1.0-3-g939500a").as_deref(),
            Some("v0.1.0-3-g939500a")
        );
        assert_eq!(normalize(""), None);
        assert_eq!(normalize("  "), None);
        assert_eq!(normalize("abc def"), None);
        assert_eq!(normalize("$(reboot)"), None);
    }
}
