//! W3C trace context: the `traceparent` a call carries in its `_meta`, so that it can be
//! followed into a server's own logs, and which its ledger entry names.

use std::fmt;

/// A W3C `traceparent`: `00-{trace id}-{parent id}-{flags}`, in lowercase hex.
///
/// A run starts a trace of its own ([`TraceParent::new_trace`]) unless the caller gives one;
/// each call goes out as a [`child`](TraceParent::child): the same trace, a span id of its
/// own.
///
/// ```
/// use maljan_client::TraceParent;
/// let caller: TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
///     .parse()
///     .unwrap();
/// let call = caller.child();
/// assert_eq!(call.trace_id(), caller.trace_id());
/// assert_ne!(call.to_string(), caller.to_string());
/// assert!("00-00000000000000000000000000000000-00f067aa0ba902b7-01"
///     .parse::<TraceParent>()
///     .is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    flags: u8,
}

/// A `traceparent` that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{text:?} is not a W3C traceparent: expected 00-<32 hex digits>-<16 hex digits>-<2 hex \
     digits>, neither id all zeros"
)]
pub struct TraceParentError {
    /// What was given (its first 80 characters).
    pub text: String,
}

/// Random bytes from the operating system; should it fail, the clock's nanoseconds
/// stretched over them (a trace id need be unique, not secret).
fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    if getrandom::getrandom(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = (nanos >> ((i % 16) * 8)) as u8 ^ (std::process::id() as u8);
        }
    }
    if bytes.iter().all(|b| *b == 0) {
        bytes[N - 1] = 1;
    }
    bytes
}

fn hex_into(out: &mut [u8], text: &str) -> Option<()> {
    if text.len() != out.len() * 2
        || !text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[i * 2..i * 2 + 2], 16).ok()?;
    }
    Some(())
}

impl TraceParent {
    /// A new trace, sampled.
    pub fn new_trace() -> Self {
        TraceParent {
            trace_id: random(),
            span_id: random(),
            flags: 1,
        }
    }

    /// The same trace with a new span id: what one call sends.
    pub fn child(&self) -> Self {
        TraceParent {
            span_id: random(),
            ..*self
        }
    }

    /// The trace id, in hex.
    pub fn trace_id(&self) -> String {
        self.trace_id.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl std::str::FromStr for TraceParent {
    type Err = TraceParentError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let refused = || TraceParentError {
            text: s.chars().take(80).collect(),
        };
        let mut parts = s.split('-');
        let (Some(version), Some(trace), Some(span), Some(flags), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(refused());
        };
        let mut parsed = TraceParent {
            trace_id: [0; 16],
            span_id: [0; 8],
            flags: 0,
        };
        let mut version_byte = [0u8; 1];
        let mut flags_byte = [0u8; 1];
        hex_into(&mut version_byte, version).ok_or_else(refused)?;
        hex_into(&mut parsed.trace_id, trace).ok_or_else(refused)?;
        hex_into(&mut parsed.span_id, span).ok_or_else(refused)?;
        hex_into(&mut flags_byte, flags).ok_or_else(refused)?;
        if version_byte[0] != 0
            || parsed.trace_id.iter().all(|b| *b == 0)
            || parsed.span_id.iter().all(|b| *b == 0)
        {
            return Err(refused());
        }
        parsed.flags = flags_byte[0];
        Ok(parsed)
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("00-")?;
        for b in self.trace_id {
            write!(f, "{b:02x}")?;
        }
        f.write_str("-")?;
        for b in self.span_id {
            write!(f, "{b:02x}")?;
        }
        write!(f, "-{:02x}", self.flags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_new_trace_reads_back_as_itself() {
        let trace = TraceParent::new_trace();
        let text = trace.to_string();
        assert_eq!(text.len(), 55);
        assert_eq!(text.parse::<TraceParent>(), Ok(trace));
        assert_ne!(TraceParent::new_trace().trace_id(), trace.trace_id());
    }

    #[test]
    fn malformed_traceparents_are_refused() {
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ü",
        ] {
            assert!(bad.parse::<TraceParent>().is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn parsing_never_panics_and_what_parses_prints_back(text in ".{0,70}") {
            if let Ok(parsed) = text.parse::<TraceParent>() {
                prop_assert_eq!(parsed.to_string(), text);
            }
        }
    }
}
