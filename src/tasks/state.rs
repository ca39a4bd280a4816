//! The task state machine: a pure function from (status, event) to the next
//! status. Terminal states absorb every later event; a move the lifecycle
//! does not allow is a typed error naming the state and the event.

use crate::protocol::tasks::TaskStatus;

/// What happened to a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// The task is created.
    Create,
    /// A step asks the client for input.
    NeedInput,
    /// Every outstanding input request has been answered.
    InputReceived,
    /// A step finished and more steps follow.
    StepDone,
    /// The tool produced its result (including `isError: true` results).
    Complete,
    /// A JSON-RPC error ended the work.
    Fail,
    /// The client (or the user, through an input response) asked to cancel,
    /// and nothing is running that must first reach a step boundary.
    CancelRequested,
}

impl Event {
    pub const ALL: [Event; 7] = [
        Event::Create,
        Event::NeedInput,
        Event::InputReceived,
        Event::StepDone,
        Event::Complete,
        Event::Fail,
        Event::CancelRequested,
    ];
}

/// A move the lifecycle forbids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IllegalTransition {
    /// `None`: the task does not exist yet.
    pub from: Option<TaskStatus>,
    pub event: Event,
}

impl std::fmt::Display for IllegalTransition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let from = self.from.map_or("absent", TaskStatus::as_str);
        write!(f, "event {:?} is not allowed in state {from}", self.event)
    }
}

/// The next status after `event` in `from` (`None`: not created yet).
pub fn next(from: Option<TaskStatus>, event: Event) -> Result<TaskStatus, IllegalTransition> {
    use Event as E;
    use TaskStatus as S;
    let illegal = Err(IllegalTransition { from, event });
    let Some(status) = from else {
        return if event == E::Create {
            Ok(S::Working)
        } else {
            illegal
        };
    };
    if event == E::Create {
        return illegal;
    }
    if status.is_terminal() {
        return Ok(status);
    }
    match (status, event) {
        (S::Working, E::NeedInput) => Ok(S::InputRequired),
        (S::Working, E::StepDone) => Ok(S::Working),
        (S::InputRequired, E::InputReceived) => Ok(S::Working),
        (_, E::Complete) if status == S::Working => Ok(S::Completed),
        (_, E::Fail) => Ok(S::Failed),
        (_, E::CancelRequested) => Ok(S::Cancelled),
        _ => illegal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TaskStatus as S;

    /// The whole state x event matrix, written out: `None` marks an illegal move.
    #[test]
    fn state_event_matrix() {
        let table: &[(Option<S>, [Option<S>; 7])] = &[
            //           Create          NeedInput              InputReceived     StepDone          Complete             Fail              CancelRequested
            (None, [Some(S::Working), None, None, None, None, None, None]),
            (
                Some(S::Working),
                [
                    None,
                    Some(S::InputRequired),
                    None,
                    Some(S::Working),
                    Some(S::Completed),
                    Some(S::Failed),
                    Some(S::Cancelled),
                ],
            ),
            (
                Some(S::InputRequired),
                [
                    None,
                    None,
                    Some(S::Working),
                    None,
                    None,
                    Some(S::Failed),
                    Some(S::Cancelled),
                ],
            ),
            (
                Some(S::Completed),
                [
                    None,
                    Some(S::Completed),
                    Some(S::Completed),
                    Some(S::Completed),
                    Some(S::Completed),
                    Some(S::Completed),
                    Some(S::Completed),
                ],
            ),
            (
                Some(S::Failed),
                [
                    None,
                    Some(S::Failed),
                    Some(S::Failed),
                    Some(S::Failed),
                    Some(S::Failed),
                    Some(S::Failed),
                    Some(S::Failed),
                ],
            ),
            (
                Some(S::Cancelled),
                [
                    None,
                    Some(S::Cancelled),
                    Some(S::Cancelled),
                    Some(S::Cancelled),
                    Some(S::Cancelled),
                    Some(S::Cancelled),
                    Some(S::Cancelled),
                ],
            ),
        ];
        let mut cells = 0;
        for (from, row) in table {
            for (event, want) in Event::ALL.iter().zip(row) {
                let got = next(*from, *event);
                match want {
                    Some(to) => assert_eq!(got, Ok(*to), "{from:?} x {event:?}"),
                    None => assert_eq!(
                        got,
                        Err(IllegalTransition {
                            from: *from,
                            event: *event
                        }),
                        "{from:?} x {event:?}"
                    ),
                }
                cells += 1;
            }
        }
        assert_eq!(cells, 6 * 7);
    }

    #[test]
    fn terminal_states_absorb() {
        for s in S::ALL.into_iter().filter(|s| s.is_terminal()) {
            for e in Event::ALL.into_iter().filter(|e| *e != Event::Create) {
                assert_eq!(next(Some(s), e), Ok(s));
            }
        }
    }

    #[test]
    fn illegal_moves_name_state_and_event() {
        let e = next(Some(S::InputRequired), Event::StepDone).unwrap_err();
        assert_eq!(
            e.to_string(),
            "event StepDone is not allowed in state input_required"
        );
    }
}
