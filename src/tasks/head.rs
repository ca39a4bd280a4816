//! The reader's head line of a stored task, read without serde when it is
//! byte for byte what [`super::encode`] writes: `{"owner":{"tenant":"…",
//! "principal":"…"},"expires_at":…,"status":"…"}`, compact, its strings
//! without escapes. Every `tasks/get` reads one; serde's derived reader of
//! the same line costs the component about ten times as much. Anything
//! else (a string with an escape, spaces, another member order, a number
//! serde would refuse) is left to serde, so what is read never differs.

use std::borrow::Cow;

use super::{OwnerRef, StoredHead};
use crate::protocol::tasks::TaskStatus;
use crate::time::Millis;

/// The head, borrowed from `line`, if `line` is exactly in the encoder's
/// form; `None` otherwise (serde then reads it).
pub(super) fn exact(line: &str) -> Option<StoredHead<'_>> {
    let rest = line.strip_prefix(r#"{"owner":{"tenant":""#)?;
    let (tenant, rest) = plain_string(rest)?;
    let rest = rest.strip_prefix(r#","principal":""#)?;
    let (principal, rest) = plain_string(rest)?;
    let rest = rest.strip_prefix(r#"},"expires_at":"#)?;
    let (expires_at, rest) = integer(rest)?;
    let rest = rest.strip_prefix(r#","status":""#)?;
    let (status, rest) = plain_string(rest)?;
    if rest != "}" {
        return None;
    }
    let status = TaskStatus::ALL.into_iter().find(|s| s.as_str() == status)?;
    Some(StoredHead {
        owner: OwnerRef {
            tenant: Cow::Borrowed(tenant),
            principal: Cow::Borrowed(principal),
        },
        expires_at,
        status,
    })
}

/// The contents of a string whose opening quote is just before `s`, and
/// what follows its closing quote; `None` if it has an escape or a control
/// character (which JSON only allows escaped) before its end.
fn plain_string(s: &str) -> Option<(&str, &str)> {
    let end = s
        .bytes()
        .position(|b| b == b'"' || b == b'\\' || b < 0x20)?;
    let (contents, rest) = s.split_at_checked(end)?;
    Some((contents, rest.strip_prefix('"')?))
}

/// A JSON integer at the start of `s` that fits an `i64`, and what follows
/// it; `None` for a leading zero, `-0` (a float to serde_json), a fraction
/// or an exponent (JSON or serde would read those differently, or not at
/// all).
fn integer(s: &str) -> Option<(Millis, &str)> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let sign = s.len() - digits.len();
    let len = digits.bytes().take_while(u8::is_ascii_digit).count();
    if len == 0 || (digits.starts_with('0') && (len > 1 || sign > 0)) {
        return None;
    }
    let rest = s.get(sign + len..)?;
    if rest.starts_with(['.', 'e', 'E']) {
        return None;
    }
    // Up to 18 digits cannot overflow an `i64`: read digit by digit with
    // plain multiplications (`str::parse` checks each step for overflow,
    // which on wasm32 is a 128-bit multiplication in software). Longer
    // numbers go through `parse`, which refuses what does not fit.
    let value = if len <= 18 {
        let magnitude = digits
            .bytes()
            .take(len)
            .fold(0, |v: Millis, d| v * 10 + Millis::from(d - b'0'));
        if sign > 0 { -magnitude } else { magnitude }
    } else {
        s.get(..sign + len)?.parse().ok()?
    };
    Some((value, rest))
}

#[cfg(test)]
mod tests {
    use super::super::StoredHeadOut;
    use super::*;
    use crate::owner::Owner;

    /// What serde reads of `line`, in the fast path's terms.
    fn by_serde(line: &str) -> Option<(String, String, Millis, TaskStatus)> {
        crate::json::from_str(line).ok().map(fields)
    }

    fn fields(h: StoredHead<'_>) -> (String, String, Millis, TaskStatus) {
        (
            h.owner.tenant.into_owned(),
            h.owner.principal.into_owned(),
            h.expires_at,
            h.status,
        )
    }

    fn encoded(tenant: &str, principal: &str, expires_at: Millis, status: TaskStatus) -> String {
        let owner = Owner {
            tenant: tenant.to_owned(),
            principal: principal.to_owned(),
        };
        let out = StoredHeadOut {
            owner: &owner,
            expires_at,
            status,
        };
        serde_json::to_string(&out).unwrap()
    }

    #[test]
    fn reads_what_encode_writes() {
        for status in TaskStatus::ALL {
            for expires_at in [
                0,
                7,
                -1,
                1_764_000_000_000,
                999_999_999_999_999_999,
                -999_999_999_999_999_999,
                1_000_000_000_000_000_000,
                i64::MAX,
                i64::MIN,
            ] {
                let line = encoded("acme", "user:é", expires_at, status);
                let h = exact(&line).expect("the encoder's form");
                assert_eq!(
                    fields(h),
                    ("acme".into(), "user:é".into(), expires_at, status)
                );
            }
        }
    }

    #[test]
    fn leaves_everything_else_to_serde() {
        let line = encoded("acme", "u", 5, TaskStatus::Working);
        assert!(exact(&line).is_some(), "{line}");
        for other in [
            encoded("a\"b", "u", 5, TaskStatus::Working),
            encoded("a\\b", "u", 5, TaskStatus::Working),
            encoded("a\nb", "u", 5, TaskStatus::Working),
            line.replace(':', ": "),
            line.replace(r#""expires_at":5"#, r#""expires_at":05"#),
            line.replace(r#""expires_at":5"#, r#""expires_at":5.0"#),
            line.replace(r#""expires_at":5"#, r#""expires_at":5e0"#),
            line.replace(r#""expires_at":5"#, r#""expires_at":-"#),
            line.replace(r#""expires_at":5"#, r#""expires_at":-0"#),
            line.replace(r#""expires_at":5"#, r#""expires_at":99999999999999999999"#),
            line.replace(r#""expires_at":5"#, r#""expires_at":9223372036854775808"#),
            line.replace(r#""expires_at":5"#, r#""expires_at":-9223372036854775809"#),
            line.replace("working", "sleeping"),
            line.replace("working", "Working"),
            format!("{line} "),
            line.replacen('}', "} ", 1),
            line.trim_end_matches('}').to_owned(),
            r#"{"owner":{"principal":"u","tenant":"acme"},"expires_at":5,"status":"working"}"#
                .to_owned(),
            r#"{"owner":{"tenant":"acme","principal":"u"},"expires_at":5,"status":"working","x":1}"#
                .to_owned(),
        ] {
            assert!(exact(&other).is_none(), "{other}");
        }
    }

    proptest::proptest! {
        /// Whatever the encoder writes is read as serde reads it, and every
        /// head without an escaped string takes the fast path.
        #[test]
        fn agrees_with_serde_on_encoded_heads(
            tenant in "\\PC{0,12}|[\"\\\\\n\u{1}a]{0,4}",
            principal in "\\PC{0,12}",
            expires_at in proptest::num::i64::ANY,
            status in proptest::sample::select(TaskStatus::ALL.to_vec()),
        ) {
            let line = encoded(&tenant, &principal, expires_at, status);
            let want = by_serde(&line);
            proptest::prop_assert!(want.is_some());
            match exact(&line) {
                Some(h) => proptest::prop_assert_eq!(Some(fields(h)), want),
                None => proptest::prop_assert!(line.contains('\\'), "declined {}", line),
            }
        }

        /// On near-miss lines the fast path never reads anything serde
        /// would read differently.
        #[test]
        fn never_differs_from_serde(
            mutation in proptest::collection::vec(
                (0usize..90, proptest::sample::select(b"\"\\{}:,0-9e. a\n".to_vec())), 0..3),
        ) {
            let mut line = encoded("acme", "user", 1_764_000_000_000, TaskStatus::InputRequired).into_bytes();
            for (at, byte) in mutation {
                let at = at.min(line.len() - 1);
                line[at] = byte;
            }
            let Ok(line) = String::from_utf8(line) else { return Ok(()) };
            if let Some(h) = exact(&line) {
                proptest::prop_assert_eq!(Some(fields(h)), by_serde(&line), "{}", line);
            }
        }
    }
}
