//! Credentials written into a URL never survive redaction, wherever the URL stands in a text.

use maljan_mcp_http::redact_credentials;
use proptest::prelude::*;

proptest! {
    #[test]
    fn user_information_never_survives(
        before in "[ -~]{0,30}",
        scheme in "(http|https|ws)",
        secret in "[A-Za-z0-9:%!$&'*+,;=._~-]{6,30}",
        host in "[a-z0-9.-]{1,20}(:[0-9]{1,5})?",
        path in "(/[ -~]{0,20})?",
        after in "[ -~]{0,30}",
    ) {
        let text = format!("{before} {scheme}://{secret}@{host}{path} {after}");
        let redacted = redact_credentials(&text);
        prop_assert!(!redacted.contains(&format!("{secret}@")), "{redacted}");
        prop_assert!(redacted.contains(&format!("{scheme}://***@{host}")), "{redacted}");
    }

    #[test]
    fn text_without_user_information_or_query_is_left_as_it_is(text in "[ ->A-~]{0,80}") {
        // No '@' and no '?' at all: nothing to redact.
        prop_assert_eq!(redact_credentials(&text), text);
    }
}

proptest! {
    #[test]
    fn a_query_string_never_survives(
        before in "[ -~]{0,30}",
        host in "[a-z0-9.-]{1,20}(:[0-9]{1,5})?",
        path in "(/[A-Za-z0-9/._-]{0,20})?",
        secret in "[A-Za-z0-9=&%._~-]{6,30}",
        after in "[ -~]{0,30}",
    ) {
        let text = format!("{before} https://{host}{path}?{secret} {after}");
        let redacted = redact_credentials(&text);
        prop_assert!(redacted.contains(&format!("https://{host}{path}?*** ")), "{redacted}");
        prop_assert!(!redacted.contains(&format!("?{secret}")), "{redacted}");
    }
}
