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
pub fn check_shape(body: &[u8], limits: &Limits) -> Result<(), String> {
    let mut members: Vec<usize> = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    let mut string_len = 0usize;
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
            b'"' => {
                in_string = true;
                string_len = 0;
            }
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn escapes_do_not_end_strings() {
        assert!(
            check_shape(br#"["ab\"[[[[[[[[[["]"#, &small()).is_err(),
            "long string"
        );
        assert_eq!(check_shape(br#"["a\\",[[1]]]"#, &small()), Ok(()));
    }
}
