//! Multi-turn conversations against a server ([`crate::bench::Conversations`]), for both
//! clients. A server's reply comes back as text, so a later turn is made only when the turn
//! before it has ended: its prompt is that turn's prompt, then its reply, then the turn's own new
//! text — for the chat API the messages so far (user, assistant, …, user), for completions the
//! texts joined. When it is due is the release rules' ([`crate::bench::run::release`]: that
//! turn's finish plus the think time, its clock starting there as on the engine). A turn whose
//! predecessor failed, or whose prompts are token ids (a reply cannot be appended to ids), fails
//! with the reason and is not sent.

use crate::bench::run::release::TURN_BEFORE_FAILED;
use crate::bench::traffic::prompts::{Message, Role};
use crate::bench::traffic::workload::Turn;
use crate::bench::RequestRecord;
use crate::remote::{Api, Prompt, RemoteRequest};

/// A request's place in its conversation, as a client needs it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RemoteTurn {
    pub session: u64,
    pub turn: u32,
    /// The index (in the run's requests) of the turn before, whose end releases this one.
    pub prev: Option<usize>,
    /// Seconds after `prev` finished that this turn is sent.
    pub think_s: f64,
    /// A later turn follows this one: keep its reply.
    pub has_next: bool,
}

impl RemoteTurn {
    /// Every request's turn, from the workload's ([`crate::bench::traffic::workload::conversation_turns`]).
    pub fn all(turns: &[Turn]) -> Vec<RemoteTurn> {
        let mut has_next = vec![false; turns.len()];
        for t in turns {
            if let Some(prev) = t.prev {
                has_next[prev] = true;
            }
        }
        turns
            .iter()
            .zip(has_next)
            .map(|(t, has_next)| RemoteTurn {
                session: t.session,
                turn: t.turn,
                prev: t.prev,
                think_s: t.think_s,
                has_next,
            })
            .collect()
    }

    /// Marks `record` as this turn's.
    pub fn mark(&self, record: &mut RequestRecord) {
        (record.session, record.turn) = (Some(self.session), Some(self.turn));
    }
}

/// How a turn ended, for the turn after it.
#[derive(Clone, Debug, Default)]
pub struct TurnEnd {
    /// The prompt it was sent with (`None`: it was not sent).
    pub sent: Option<Prompt>,
    /// Its answer's text.
    pub reply: String,
    /// Its record's prompt and output tokens.
    pub prompt_len: usize,
    pub output_len: usize,
    /// When it finished, in seconds from the run's start; `None`: it failed or was not sent.
    pub finish_s: Option<f64>,
}

impl TurnEnd {
    /// The end of a turn sent as `sent`, with its record and reply.
    pub fn of(sent: Prompt, record: &RequestRecord, reply: String) -> TurnEnd {
        let finish_s = record.finish_s.filter(|_| record.error.is_none());
        TurnEnd { sent: Some(sent), reply, prompt_len: record.prompt_len, output_len: record.output_len, finish_s }
    }
}

/// A later turn, made from the end of the turn before: when that turn finished (seconds from the
/// run's start) and the request with the whole conversation as its prompt. `Err`: why it cannot
/// be sent (the record says so; [`failed`]).
pub fn next_turn(api: Api, request: &RemoteRequest, before: &TurnEnd) -> Result<(f64, RemoteRequest), String> {
    let (Some(sent), Some(finish_s)) = (&before.sent, before.finish_s) else {
        return Err(TURN_BEFORE_FAILED.into());
    };
    let prompt = join(api, sent, &before.reply, &request.prompt)?;
    // The planned count: the history as counted before, then the new text's.
    let prompt_len = before.prompt_len.saturating_add(before.output_len).saturating_add(request.prompt_len);
    Ok((finish_s, RemoteRequest { prompt, prompt_len, ..request.clone() }))
}

/// The record of a turn that could not be sent at `at_s`, and why.
pub fn failed(request: &RemoteRequest, at_s: f64, why: String) -> RequestRecord {
    RequestRecord {
        id: request.id,
        arrival_s: at_s,
        prompt_len: request.prompt_len,
        error: Some(why),
        ..RequestRecord::default()
    }
}

/// The conversation so far: `before` (the turn before's prompt), its `reply`, then `new`.
fn join(api: Api, before: &Prompt, reply: &str, new: &Prompt) -> Result<Prompt, String> {
    let text = |p: &Prompt| match p {
        Prompt::Text(t) => Ok(t.clone()),
        Prompt::Ids(_) => {
            Err("a conversation needs text prompts: a server's reply cannot follow token ids".to_string())
        }
        Prompt::Messages(_) => Err("a conversation's new turn is one text".to_string()),
    };
    let new = text(new)?;
    match (api, before) {
        (Api::Chat, Prompt::Messages(messages)) => {
            let mut messages = messages.clone();
            messages.push(Message { role: Role::Assistant, content: reply.to_string() });
            messages.push(Message { role: Role::User, content: new });
            Ok(Prompt::Messages(messages))
        }
        (Api::Chat, before) => Ok(Prompt::Messages(vec![
            Message { role: Role::User, content: text(before)? },
            Message { role: Role::Assistant, content: reply.to_string() },
            Message { role: Role::User, content: new },
        ])),
        (Api::Completions, before) => Ok(Prompt::Text([text(before)?.as_str(), reply, &new].concat())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(prompt: Prompt) -> RemoteRequest {
        RemoteRequest { id: 7, arrival_s: None, prompt, prompt_len: 5, max_tokens: 9, turn: None, cancel_after_s: None }
    }

    fn ended(sent: Prompt, reply: &str, finish_s: Option<f64>) -> TurnEnd {
        TurnEnd { sent: Some(sent), reply: reply.into(), prompt_len: 12, output_len: 4, finish_s }
    }

    /// Turn 3 of a chat: the messages so far, the reply, the new text, with the turn before's
    /// finish; its planned prompt the history's tokens and its own.
    #[test]
    fn a_later_turn_carries_the_conversation() {
        let user = |t: &str| Message { role: Role::User, content: t.into() };
        let bot = |t: &str| Message { role: Role::Assistant, content: t.into() };
        let first = ended(Prompt::Text("Hi".into()), "Hello!", Some(2.0));
        let (finished_s, second) = next_turn(Api::Chat, &request(Prompt::Text("Why?".into())), &first).unwrap();
        assert_eq!(finished_s, 2.0);
        assert_eq!(second.prompt, Prompt::Messages(vec![user("Hi"), bot("Hello!"), user("Why?")]));
        assert_eq!((second.prompt_len, second.id, second.max_tokens), (12 + 4 + 5, 7, 9));
        let third_from = ended(second.prompt.clone(), "Because.", Some(4.0));
        let (_, third) = next_turn(Api::Chat, &request(Prompt::Text("Ok".into())), &third_from).unwrap();
        assert_eq!(
            third.prompt,
            Prompt::Messages(vec![user("Hi"), bot("Hello!"), user("Why?"), bot("Because."), user("Ok")])
        );
        // Completions: the texts joined.
        let (_, text) = next_turn(
            Api::Completions,
            &request(Prompt::Text(" B".into())),
            &ended(Prompt::Text("A".into()), " r", Some(1.0)),
        )
        .unwrap();
        assert_eq!(text.prompt, Prompt::Text("A r B".into()));
    }

    #[test]
    fn a_turn_after_a_failure_or_after_ids_is_not_sent() {
        let failed_before = ended(Prompt::Text("Hi".into()), "", None);
        assert_eq!(
            next_turn(Api::Chat, &request(Prompt::Text("x".into())), &failed_before).unwrap_err(),
            TURN_BEFORE_FAILED
        );
        let ids = ended(Prompt::Ids(vec![1, 2]), "r", Some(1.0));
        let why = next_turn(Api::Completions, &request(Prompt::Ids(vec![3])), &ids).unwrap_err();
        assert!(why.contains("needs text prompts"), "{why}");
        let record = failed(&request(Prompt::Text("x".into())), 3.0, why.clone());
        assert_eq!((record.id, record.arrival_s, record.error), (7, 3.0, Some(why)));
    }

    #[test]
    fn turns_know_their_successors() {
        let turn = |session, turn, prev| Turn { session, turn, prev, think_s: 1.0, new_len: 3 };
        let all = RemoteTurn::all(&[
            turn(0, 0, None),
            turn(1, 0, None),
            turn(0, 1, Some(0)),
            turn(1, 1, Some(1)),
            turn(0, 2, Some(2)),
        ]);
        assert_eq!(all.iter().map(|t| t.has_next).collect::<Vec<_>>(), [true, true, true, false, false]);
        let mut record = RequestRecord::default();
        all[4].mark(&mut record);
        assert_eq!((record.session, record.turn), (Some(0), Some(2)));
    }
}
