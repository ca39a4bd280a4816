//! Input limits, checked before the body is parsed: nesting depth, string
//! length and members per array or object. Every refusal is a clear
//! JSON-RPC error; nothing is allocated for a refused body.

/// The limits a server enforces. Body size is in [`crate::config::Config`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Deepest nesting of arrays and objects.
    pub max_depth: usize,
    /// Longest string (in bytes, as sent, escapes included).
    pub max_string_bytes: usize,
    /// Most members of one array or object.
    pub max_members: usize,
    /// Most entries in one `inputResponses`.
    pub max_input_responses: usize,
    /// Most unfinished tasks one principal may have (0: no quota).
    pub max_outstanding_tasks: usize,
    /// Most bytes one principal's tasks may store, finished ones included,
    /// until they expire (0: no limit).
    pub max_stored_bytes: u64,
    /// Largest stored task (its arguments, state and result); a create
    /// beyond it is refused, a step that would pass it fails the task.
    pub max_task_bytes: usize,
    /// Largest `arguments` of a call that creates a task, as JSON.
    pub max_argument_bytes: usize,
    /// Most tasks one principal may create per minute (0: no limit).
    pub max_tasks_per_minute: u32,
    /// Most open listen streams per principal (0: no limit).
    pub max_listen_streams: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 32,
            max_string_bytes: 64 * 1024,
            max_members: 1_000,
            max_input_responses: 32,
            max_outstanding_tasks: 100,
            max_stored_bytes: 32 * 1024 * 1024,
            max_task_bytes: 1024 * 1024,
            max_argument_bytes: 256 * 1024,
            max_tasks_per_minute: 600,
            max_listen_streams: 16,
        }
    }
}

/// Scans `body` once. Malformed JSON is left to the parser (-32700); this
/// only refuses shapes beyond the limits.
///
/// Strings, most of any message, are crossed eight bytes at a time to the
/// next quote or backslash; the members of each open array or object are
/// counted on the stack (up to 64 levels, beyond which a
/// configured depth spills to the heap).
pub fn check_shape(body: &[u8], limits: &Limits) -> Result<(), String> {
    let mut inline = [0usize; INLINE_DEPTH];
    let mut spilled: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(&b) = body.get(i) {
        i += 1;
        match b {
            b'"' => {
                let start = i;
                let end = string_end(body, i);
                if end - start > limits.max_string_bytes {
                    return Err(format!(
                        "a string is longer than {} bytes.",
                        limits.max_string_bytes
                    ));
                }
                i = end + 1;
            }
            b'[' | b'{' => {
                if depth >= limits.max_depth {
                    return Err(format!(
                        "JSON nesting is deeper than {} levels.",
                        limits.max_depth
                    ));
                }
                match inline.get_mut(depth) {
                    Some(n) => *n = 1,
                    None => {
                        spilled.truncate(depth - INLINE_DEPTH);
                        spilled.push(1);
                    }
                }
                depth += 1;
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b',' if depth > 0 => {
                let top = depth - 1;
                let n = match inline.get_mut(top) {
                    Some(n) => n,
                    None => match spilled.get_mut(top - INLINE_DEPTH) {
                        Some(n) => n,
                        None => continue,
                    },
                };
                *n += 1;
                if *n > limits.max_members {
                    return Err(format!(
                        "an array or object has more than {} members.",
                        limits.max_members
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Nesting levels whose member counts live on the stack.
const INLINE_DEPTH: usize = 64;

/// The index of the quote that closes the string whose contents start at
/// `i` (escaped characters skipped), or `body.len()` if it never closes.
fn string_end(body: &[u8], mut i: usize) -> usize {
    loop {
        match quote_or_backslash(body, i) {
            Some(j) if body.get(j) == Some(&b'\\') => i = j + 2,
            Some(j) => return j,
            None => return body.len(),
        }
    }
}

/// The first `"` or `\` at or after `i`, looked for eight bytes at a time
/// (the shape check and [`crate::protocol::meta::split_meta`] share it).
#[inline]
pub(crate) fn quote_or_backslash(body: &[u8], i: usize) -> Option<usize> {
    first_of(body, i, b'"', b'\\')
}

/// The first byte at or after `i` that is `a` or `b`, looked for eight
/// bytes at a time: on wasm a byte loop costs about three times as much.
#[inline]
pub(crate) fn first_of(body: &[u8], i: usize, a: u8, b: u8) -> Option<usize> {
    first_flagged(
        body,
        i,
        |w| bytes_equal(w, a) | bytes_equal(w, b),
        |c| c == a || c == b,
    )
}

/// `s.trim()`, answered at once where both ends are visible ASCII (nearly
/// every header value and token): `str::trim` decodes a character from
/// each end to ask whether it is white space.
pub(crate) fn trimmed(s: &str) -> &str {
    match (s.as_bytes().first(), s.as_bytes().last()) {
        (Some(a), Some(z)) if a.is_ascii_graphic() && z.is_ascii_graphic() => s,
        _ => s.trim(),
    }
}

/// `value` without HTTP's optional whitespace around a field value: spaces
/// and tabs only (RFC 9110, section 5.5). Anything else at either end stays
/// part of the value and is judged with it.
pub(crate) fn trim_ows(value: &str) -> &str {
    // By bytes: `str::trim_matches` decodes each character from both ends.
    let ows = |b: &u8| *b == b' ' || *b == b'\t';
    let bytes = value.as_bytes();
    let start = bytes.iter().position(|b| !ows(b)).unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|b| !ows(b)).map_or(start, |i| i + 1);
    // Both ends sit next to an ASCII byte or at an end: char boundaries.
    value.get(start..end).unwrap_or_default()
}

/// The first `a` at or after `i` in `body`, looked for eight bytes at a
/// time.
pub(crate) fn first_byte(body: &[u8], i: usize, a: u8) -> Option<usize> {
    first_flagged(body, i, |w| bytes_equal(w, a), |c| c == a)
}

/// Whether `name` is `lower` with its letters in either case, as
/// `eq_ignore_ascii_case` says, compared eight bytes at a time. `lower`
/// must be ASCII with its letters in lower case (a header name this crate
/// knows).
pub(crate) fn same_name(name: &[u8], lower: &[u8]) -> bool {
    words_agree(
        name,
        lower,
        |n, l| {
            // 0x20 in each byte where `lower` holds a letter: `n | mask`
            // folds an upper-case letter there onto its lower case, and
            // nothing else onto a letter (the bit is already set in every
            // lower-case one).
            let at_least_a = l.wrapping_add(ONES * u64::from(0x80 - b'a')) & HIGH;
            let past_z = l.wrapping_add(ONES * u64::from(0x80 - b'z' - 1)) & HIGH;
            n | ((at_least_a & !past_z) >> 2) == l
        },
        <[u8]>::eq_ignore_ascii_case,
    )
}

/// Whether `a` and `b` have one length and every eight bytes of theirs
/// (as words, in the same byte order) satisfy `word`, and the last fewer
/// than eight `tail`.
#[inline(always)]
fn words_agree(
    a: &[u8],
    b: &[u8],
    word: impl Fn(u64, u64) -> bool,
    tail: impl Fn(&[u8], &[u8]) -> bool,
) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (mut x, mut y) = (a, b);
    while let (Some((wx, rx)), Some((wy, ry))) =
        (x.split_first_chunk::<8>(), y.split_first_chunk::<8>())
    {
        if !word(u64::from_ne_bytes(*wx), u64::from_ne_bytes(*wy)) {
            return false;
        }
        (x, y) = (rx, ry);
    }
    tail(x, y)
}

/// Whether every byte of `value` may stand in a header value this crate
/// reads: a tab, or `0x20..0x7f` (space and visible ASCII); eight bytes at
/// a time.
pub(crate) fn is_field_text(value: &[u8]) -> bool {
    let byte = |b: &u8| *b == b'\t' || (0x20..0x7f).contains(b);
    let mut x = value;
    while let Some((w, rest)) = x.split_first_chunk::<8>() {
        let v = u64::from_le_bytes(*w);
        // Any byte with its high bit set, below 0x20 or 0x7f flags the
        // word (each test is exact as to whether any byte is one); a tab
        // among them is then looked at byte by byte.
        let flagged = (v & HIGH) | bytes_below(v, 0x20) | bytes_equal(v, 0x7f);
        if flagged != 0 && !w.iter().all(byte) {
            return false;
        }
        x = rest;
    }
    x.iter().all(byte)
}

/// The first byte at or after `i` that `byte` holds true of, looked for
/// eight bytes at a time with `word`, which must flag (set the high bit of)
/// the lowest byte of a little-endian word that `byte` holds true of, and
/// may flag others only above it.
#[inline]
pub(crate) fn first_flagged(
    body: &[u8],
    mut i: usize,
    word: impl Fn(u64) -> u64,
    byte: impl Fn(u8) -> bool,
) -> Option<usize> {
    while let Some(w) = body.get(i..i + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()) {
        let found = word(u64::from_le_bytes(w));
        if found != 0 {
            return Some(i + (found.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    body.get(i..)?.iter().position(|&c| byte(c)).map(|p| i + p)
}

/// Whether `a` and `b` hold the same bytes, compared eight at a time. On
/// wasm, `==` on strings and slices calls the C library's `memcmp`, a loop
/// over single bytes; the request path compares ids, owners and extension
/// names this way instead.
#[inline]
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    words_agree(
        a,
        b,
        |x, y| x == y,
        |x, y| x.iter().zip(y).all(|(p, q)| p == q),
    )
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `w` that equals `b` (and possibly of bytes
/// above one that does: a borrow can carry upward, never downward).
#[inline]
pub(crate) fn bytes_equal(w: u64, b: u8) -> u64 {
    let x = w ^ (ONES * u64::from(b));
    x.wrapping_sub(ONES) & !x & HIGH
}

/// The high bit of each byte of `w` below `n` (`n` at most 128; as
/// [`bytes_equal`], possibly of bytes above one that is).
#[inline]
pub(crate) fn bytes_below(w: u64, n: u8) -> u64 {
    w.wrapping_sub(ONES * u64::from(n)) & !w & HIGH
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pair of ends from ASCII and Unicode white space, controls and
    /// visible characters, around a middle with and without white space.
    #[test]
    fn trimmed_is_str_trim() {
        let ends = [
            "",
            " ",
            "\t",
            "\n",
            "\r",
            "\u{b}",
            "\u{c}",
            "\u{0}",
            "\u{1f}",
            "\u{7f}",
            "\u{85}",
            "\u{a0}",
            "\u{2003}",
            "\u{3000}",
            "a",
            "~",
            "!",
            "\u{e9}",
            "\u{1f600}",
        ];
        for a in ends {
            for z in ends {
                for middle in ["", "x", "2026-07-28", "a b", "\u{a0}"] {
                    let s = format!("{a}{middle}{z}");
                    assert_eq!(trimmed(&s), s.trim(), "{s:?}");
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn trimmed_agrees_with_str_trim(s in "\\s{0,2}\\PC{0,8}\\s{0,2}|[\\x00-\\x7f]{0,6}") {
            proptest::prop_assert_eq!(trimmed(&s), s.trim());
        }
    }

    #[test]
    fn same_name_agrees_with_eq_ignore_ascii_case() {
        let names: [&[u8]; 4] = [
            b"mcp-method",
            b"mcp-name",
            b"mcp-protocol-version",
            b"a-z0129@[`{",
        ];
        for lower in names {
            assert!(same_name(lower, lower));
            assert!(same_name(&lower.to_ascii_uppercase(), lower));
            // Every byte in every position.
            for k in 0..lower.len() {
                for b in 0..=255u8 {
                    let mut name = lower.to_vec();
                    name[k] = b;
                    assert_eq!(
                        same_name(&name, lower),
                        name.eq_ignore_ascii_case(lower),
                        "{name:?} {lower:?}"
                    );
                }
            }
            assert!(!same_name(&lower[1..], lower));
        }
    }

    #[test]
    fn field_text_is_tabs_and_visible_ascii() {
        let byte = |b: &u8| *b == b'\t' || (0x20..0x7f).contains(b);
        for n in 0..20 {
            let ok: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
            assert!(is_field_text(&ok));
            for k in 0..n {
                for b in 0..=255u8 {
                    let mut v = ok.clone();
                    v[k] = b;
                    assert_eq!(is_field_text(&v), v.iter().all(byte), "{v:?}");
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn field_text_agrees_byte_by_byte(v in proptest::collection::vec(proptest::num::u8::ANY, 0..40)) {
            let byte = |b: &u8| *b == b'\t' || (0x20..0x7f).contains(b);
            proptest::prop_assert_eq!(is_field_text(&v), v.iter().all(byte));
        }

        #[test]
        fn same_name_agrees_for_any_bytes(v in proptest::collection::vec(proptest::num::u8::ANY, 0..24)) {
            for lower in [&b"mcp-method"[..], b"mcp-name", b"mcp-protocol-version"] {
                proptest::prop_assert_eq!(same_name(&v, lower), v.eq_ignore_ascii_case(lower));
            }
        }
    }

    #[test]
    fn same_bytes_agrees_with_eq() {
        let texts: [&[u8]; 9] = [
            b"",
            b"a",
            b"tsk_AaJMA36x__UMx9IFLIX-Ow",
            b"tsk_AaJMA36x__UMx9IFLIX-Ox",
            b"usk_AaJMA36x__UMx9IFLIX-Ow",
            b"io.modelcontextprotocol/tasks",
            b"io.modelcontextprotocol/taskz",
            b"12345678",
            b"12345679",
        ];
        for a in texts {
            for b in texts {
                assert_eq!(same_bytes(a, b), a == b, "{a:?} {b:?}");
            }
        }
        // A difference in every position, and lengths around the word size.
        for n in 0..20 {
            let a: Vec<u8> = (0..n).map(|i| i as u8).collect();
            assert!(same_bytes(&a, &a.clone()));
            for k in 0..n {
                let mut b = a.clone();
                b[k] ^= 0x80;
                assert!(!same_bytes(&a, &b), "{n} {k}");
            }
        }
    }

    fn small() -> Limits {
        Limits {
            max_depth: 3,
            max_string_bytes: 5,
            max_members: 3,
            ..Limits::default()
        }
    }

    #[test]
    fn accepts_what_fits() {
        for ok in [
            r#"{"a":[1,2,3]}"#,
            r#"[[[]]]"#,
            r#"{"abcde":"x\"yz"}"#,
            r#"{"s":"[[,,"}"#,
            "not json at all",
        ] {
            assert_eq!(check_shape(ok.as_bytes(), &small()), Ok(()), "{ok}");
        }
    }

    #[test]
    fn refuses_what_does_not() {
        for bad in [
            r#"[[[[]]]]"#,
            r#"{"a":"123456"}"#,
            r#"[1,2,3,4]"#,
            r#"{"a":1,"b":2,"c":3,"d":4}"#,
        ] {
            assert!(check_shape(bad.as_bytes(), &small()).is_err(), "{bad}");
        }
    }

    /// The byte-at-a-time scan the fast one must agree with.
    fn reference(body: &[u8], limits: &Limits) -> Result<(), String> {
        let mut members: Vec<usize> = Vec::new();
        let (mut in_string, mut escaped, mut string_len) = (false, false, 0usize);
        for &b in body {
            if in_string {
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == b'"' {
                    in_string = false;
                    continue;
                }
                string_len += 1;
                if string_len > limits.max_string_bytes {
                    return Err(format!(
                        "a string is longer than {} bytes.",
                        limits.max_string_bytes
                    ));
                }
                continue;
            }
            match b {
                b'"' => (in_string, string_len) = (true, 0),
                b'[' | b'{' => {
                    if members.len() >= limits.max_depth {
                        return Err(format!(
                            "JSON nesting is deeper than {} levels.",
                            limits.max_depth
                        ));
                    }
                    members.push(1);
                }
                b']' | b'}' => {
                    members.pop();
                }
                b',' => {
                    if let Some(n) = members.last_mut() {
                        *n += 1;
                        if *n > limits.max_members {
                            return Err(format!(
                                "an array or object has more than {} members.",
                                limits.max_members
                            ));
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    proptest::proptest! {
        #[test]
        fn agrees_with_the_byte_at_a_time_scan(
            body in proptest::collection::vec(
                proptest::sample::select(b"\"\\[]{},:ab1 ".to_vec()), 0..200),
            depth in 0usize..80,
            string in 0usize..12,
            members in 0usize..6,
        ) {
            let limits = Limits { max_depth: depth, max_string_bytes: string, max_members: members, ..Limits::default() };
            proptest::prop_assert_eq!(check_shape(&body, &limits), reference(&body, &limits));
        }
    }

    #[test]
    fn deep_nesting_past_the_stack_levels_is_counted() {
        let limits = Limits {
            max_depth: 100,
            max_members: 2,
            ..Limits::default()
        };
        let ok = format!("{}1,2{}", "[".repeat(90), "]".repeat(90));
        assert_eq!(check_shape(ok.as_bytes(), &limits), Ok(()));
        let wide = format!("{}1,2,3{}", "[".repeat(90), "]".repeat(90));
        assert_eq!(
            check_shape(wide.as_bytes(), &limits),
            reference(wide.as_bytes(), &limits)
        );
        assert!(check_shape(wide.as_bytes(), &limits).is_err());
        let deep = "[".repeat(101);
        assert!(check_shape(deep.as_bytes(), &limits).is_err());
        // Levels below the stack keep their counts after a deeper one closes.
        let after = format!("{}[1],1,2,3{}", "[".repeat(70), "]".repeat(70));
        assert_eq!(
            check_shape(after.as_bytes(), &limits),
            reference(after.as_bytes(), &limits)
        );
        assert!(check_shape(after.as_bytes(), &limits).is_err());
    }

    #[test]
    fn long_strings_are_measured_across_words() {
        let limits = Limits {
            max_string_bytes: 20,
            ..Limits::default()
        };
        for n in 0..40 {
            for esc in [false, true] {
                let inner = if esc {
                    format!("{}\\\"{}", "x".repeat(n / 2), "y".repeat(n / 2))
                } else {
                    "z".repeat(n)
                };
                let body = format!(r#"{{"k":"{inner}","l":[1]}}"#);
                assert_eq!(
                    check_shape(body.as_bytes(), &limits),
                    reference(body.as_bytes(), &limits),
                    "{body}"
                );
            }
        }
    }

    #[test]
    fn escapes_do_not_end_strings() {
        assert!(
            check_shape(br#"["ab\"[[[[[[[[[["]"#, &small()).is_err(),
            "long string"
        );
        assert_eq!(check_shape(br#"["a\\",[[1]]]"#, &small()), Ok(()));
    }

    proptest::proptest! {
        /// The word-at-a-time search finds what a byte loop finds.
        #[test]
        fn quote_or_backslash_is_the_first(
            b in proptest::collection::vec(proptest::prop_oneof![
                1 => proptest::prelude::Just(b'"'),
                1 => proptest::prelude::Just(b'\\'),
                30 => proptest::prelude::any::<u8>(),
            ], 0..40),
            from in 0usize..41,
        ) {
            let naive = b.get(from..).and_then(|t| t.iter().position(|&c| c == b'"' || c == b'\\')).map(|k| from + k);
            proptest::prop_assert_eq!(quote_or_backslash(&b, from), naive);
        }

        #[test]
        fn first_of_is_the_first(
            b in proptest::collection::vec(proptest::prop_oneof![
                1 => proptest::prelude::Just(b':'),
                1 => proptest::prelude::Just(0xff_u8),
                30 => proptest::prelude::any::<u8>(),
            ], 0..40),
            from in 0usize..41,
            x in proptest::prop_oneof![proptest::prelude::Just(b':'), proptest::prelude::any::<u8>()],
            y in proptest::prop_oneof![proptest::prelude::Just(0xff_u8), proptest::prelude::any::<u8>()],
        ) {
            let naive = b.get(from..).and_then(|t| t.iter().position(|&c| c == x || c == y)).map(|k| from + k);
            proptest::prop_assert_eq!(first_of(&b, from, x, y), naive);
        }
    }

    #[test]
    fn optional_white_space_is_trimmed_as_trim_matches_trims_it() {
        let values = [
            "",
            " ",
            "\t",
            " \t ",
            "a",
            " a",
            "a ",
            "\ta\t",
            " a b ",
            "\u{a0}a\u{a0}",
            " é ",
            "\té",
            "é\t",
            "\u{b}a",
            "a\r",
            " \t€ \t",
        ];
        for v in values {
            assert_eq!(trim_ows(v), v.trim_matches([' ', '\t']), "{v:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn trim_ows_agrees_with_trim_matches(v in r"[ \t]{0,3}(\PC|[ \t]){0,12}[ \t]{0,3}") {
            proptest::prop_assert_eq!(trim_ows(&v), v.trim_matches([' ', '\t']));
        }
    }
}
