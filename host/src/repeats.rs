//! The ticker's failure lines, without repeats: a fault that lasts (a store
//! that keeps failing, a component started without its settings) fails
//! every tick, ten times a second, and would otherwise write as many lines.
//!
//! The first failure of a kind is written at once. Further failures of the
//! same kind are counted, and one line a minute says how many there were.
//! A failure of another kind is written at once, and a tick without errors
//! after held ones says that the failures stopped and how many were held.

/// What failed, for telling a repeat from a new failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The tick ran and reported errors (its report is the line).
    Errors,
    /// The tick itself failed, with this message.
    Failed(String),
}

/// Failures held back since the last line written.
#[derive(Debug)]
struct Held {
    kind: Failure,
    /// When the last line of this kind was written (ms).
    written_at: i64,
    /// Failures of this kind since then that were not written.
    count: u64,
}

/// Decides which tick failures are written; see the module documentation.
#[derive(Debug, Default)]
pub struct RepeatLog {
    held: Option<Held>,
}

/// How long like failures are held before one line reports them.
pub const EVERY_MS: i64 = 60_000;

impl RepeatLog {
    pub fn new() -> Self {
        Self::default()
    }

    /// The line to write for a failure of `kind` at `now` (ms) whose own
    /// line is `line`, or `None` when it is a repeat to hold.
    pub fn failed(&mut self, kind: Failure, line: &str, now: i64) -> Option<String> {
        match &mut self.held {
            Some(held) if held.kind == kind && now.saturating_sub(held.written_at) < EVERY_MS => {
                held.count += 1;
                None
            }
            Some(held) if held.kind == kind => {
                let out = format!(
                    "{line} (and {} more like it in the last {} s)",
                    held.count,
                    now.saturating_sub(held.written_at) / 1000
                );
                held.written_at = now;
                held.count = 0;
                Some(out)
            }
            _ => {
                let earlier = self.held.take().filter(|h| h.count > 0);
                self.held = Some(Held {
                    kind,
                    written_at: now,
                    count: 0,
                });
                Some(match earlier {
                    Some(h) => format!("{line} (after {} more like the last line)", h.count),
                    None => line.to_owned(),
                })
            }
        }
    }

    /// A tick without errors: the line saying the failures stopped, if
    /// any were held back.
    pub fn recovered(&mut self) -> Option<String> {
        let held = self.held.take()?;
        (held.count > 0).then(|| {
            format!(
                "host: tick: no errors again (after {} more like the last line)",
                held.count
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_failure_is_written_and_its_repeats_once_a_minute() {
        let mut log = RepeatLog::new();
        assert_eq!(
            log.failed(Failure::Errors, "a", 0).as_deref(),
            Some("a"),
            "the first at once"
        );
        for t in (100..EVERY_MS).step_by(100) {
            assert_eq!(log.failed(Failure::Errors, "a", t), None, "at {t}");
        }
        assert_eq!(
            log.failed(Failure::Errors, "a", EVERY_MS).as_deref(),
            Some("a (and 599 more like it in the last 60 s)")
        );
        assert_eq!(log.failed(Failure::Errors, "a", EVERY_MS + 100), None);
        assert_eq!(
            log.recovered().as_deref(),
            Some("host: tick: no errors again (after 1 more like the last line)")
        );
        assert_eq!(log.recovered(), None, "said once");
    }

    #[test]
    fn another_kind_is_written_at_once() {
        let mut log = RepeatLog::new();
        assert!(log.failed(Failure::Errors, "a", 0).is_some());
        assert_eq!(log.failed(Failure::Errors, "a", 100), None);
        let failed = Failure::Failed("trap".into());
        assert_eq!(
            log.failed(failed.clone(), "b", 200).as_deref(),
            Some("b (after 1 more like the last line)")
        );
        assert_eq!(log.failed(failed, "b", 300), None);
        assert_eq!(
            log.failed(Failure::Failed("other".into()), "c", 400)
                .as_deref(),
            Some("c (after 1 more like the last line)")
        );
    }

    #[test]
    fn a_single_failure_leaves_no_recovery_line() {
        let mut log = RepeatLog::new();
        assert!(log.failed(Failure::Errors, "a", 0).is_some());
        assert_eq!(log.recovered(), None);
        assert_eq!(
            log.failed(Failure::Errors, "a", 100).as_deref(),
            Some("a"),
            "after a clean tick, a failure is new again"
        );
    }
}
