//! Every message between a coordinator and its agents is sealed with the secret they share
//! (`--secret-file FILE` or `ANYPLAY_LOAD_SECRET`): HMAC-SHA256 over the message's channel,
//! its sequence number and its bytes, so that nobody else on their NATS can offer work, give
//! orders, forge facts or health, or ask for sign-in codes.
//!
//! Keys are per run and per agent: a run's offers and answers use a key drawn from the secret
//! and the run's id; each agent's answer names a nonce of its own, and everything after it
//! between that agent and its coordinator uses a key drawn from the secret, the run, the
//! agent's name and that nonce. A message of another run or another agent's session does not
//! open. Within a session each channel's number is taken once ([`Replays`]), a reply
//! carries its request's number, and an offer carries the coordinator's clock, which the
//! agent holds to [`OFFER_AGE`]: a message seen once cannot be played again.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The environment variable that may hold the secret instead of a file.
pub const SECRET_ENV: &str = "ANYPLAY_LOAD_SECRET";
/// Fewer bytes than this is no secret.
const SECRET_MIN: usize = 16;
/// How far an offer's clock may be from the agent's, either way (machines' clocks differ).
pub const OFFER_AGE: std::time::Duration = std::time::Duration::from_secs(300);
const MAC_LEN: usize = 32;
const SEQ_LEN: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error(
        "no secret: give --secret-file FILE or set {SECRET_ENV} (the same on the coordinator and \
         every agent; at least {SECRET_MIN} bytes)"
    )]
    Missing,
    #[error("the secret in {0} cannot be read: {1}")]
    Read(String, std::io::Error),
    #[error("the secret is {0} bytes; it must be at least {SECRET_MIN}")]
    Short(usize),
    #[error("not sealed with this secret, for this run and this channel")]
    Forged,
    #[error("a replay: number {seq} was taken already, or is too far behind {newest}")]
    Replayed { seq: u64, newest: u64 },
}

/// The shared secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<[u8]>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

impl Secret {
    /// The secret in `file`, else in [`SECRET_ENV`]; a trailing newline is no part of it.
    pub fn load(file: Option<&Path>) -> Result<Secret, SealError> {
        let bytes = match file {
            Some(path) => anyplay_cloud::small_file::read(path)
                .map_err(|e| SealError::Read(path.display().to_string(), e))?,
            None => std::env::var(SECRET_ENV)
                .map_err(|_| SealError::Missing)?
                .into_bytes(),
        };
        Secret::new(bytes)
    }

    /// A fresh secret, as text (for agents a run starts itself).
    pub fn fresh() -> (Secret, String) {
        let text = format!("{}{}", nonce(), nonce());
        let secret = Secret::new(text.clone().into_bytes()).expect("64 characters");
        (secret, text)
    }

    pub fn new(mut bytes: Vec<u8>) -> Result<Secret, SealError> {
        while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            bytes.pop();
        }
        if bytes.len() < SECRET_MIN {
            return Err(SealError::Short(bytes.len()));
        }
        Ok(Secret(bytes.into()))
    }

    fn derive(&self, label: &str) -> Key {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key");
        mac.update(label.as_bytes());
        Key(mac.finalize().into_bytes().into())
    }

    /// The key of run `run`'s offers and answers.
    pub fn run_key(&self, run: &str) -> Key {
        self.derive(&format!("anyplay-load run {run}"))
    }

    /// The key of agent `agent`'s session in run `run`, after its answer with `nonce`.
    pub fn session_key(&self, run: &str, agent: &str, nonce: &str) -> Key {
        self.derive(&format!("anyplay-load session {run} {agent} {nonce}"))
    }
}

/// What a sealed message is: part of what the seal covers, so one cannot stand for another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Offer,
    Answer,
    Request,
    Reply,
    Event,
    CodeRequest,
    CodeReply,
}

impl Channel {
    fn label(self) -> u8 {
        self as u8
    }
}

/// A key messages are sealed and opened with.
#[derive(Clone)]
pub struct Key([u8; 32]);

impl Key {
    fn mac(&self, channel: Channel, seq: u64, body: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key");
        mac.update(&[channel.label()]);
        mac.update(&seq.to_be_bytes());
        mac.update(body);
        mac
    }

    /// `body` sealed: its number, the seal, then the body.
    pub fn seal(&self, channel: Channel, seq: u64, body: &[u8]) -> Vec<u8> {
        let tag = self.mac(channel, seq, body).finalize().into_bytes();
        let mut sealed = Vec::with_capacity(SEQ_LEN + MAC_LEN + body.len());
        sealed.extend_from_slice(&seq.to_be_bytes());
        sealed.extend_from_slice(&tag);
        sealed.extend_from_slice(body);
        sealed
    }

    /// The number and the body of a message sealed with this key on `channel`.
    pub fn open<'a>(
        &self,
        channel: Channel,
        sealed: &'a [u8],
    ) -> Result<(u64, &'a [u8]), SealError> {
        if sealed.len() < SEQ_LEN + MAC_LEN {
            return Err(SealError::Forged);
        }
        let (seq, rest) = sealed.split_at(SEQ_LEN);
        let (tag, body) = rest.split_at(MAC_LEN);
        let seq = u64::from_be_bytes(seq.try_into().expect("eight bytes"));
        self.mac(channel, seq, body)
            .verify_slice(tag)
            .map_err(|_| SealError::Forged)?;
        Ok((seq, body))
    }
}

/// The body of a sealed message, unverified: the seal authenticates, it does not hide, and
/// an observer (a test overhearing NATS) may read what went by.
pub fn unverified_body(sealed: &[u8]) -> Option<&[u8]> {
    sealed.get(SEQ_LEN + MAC_LEN..)
}

/// The numbers one side gives a channel's messages: 1, 2, 3 …
#[derive(Debug, Default)]
pub struct Numbers(AtomicU64);

impl Numbers {
    pub fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// How far behind the newest number a message may still arrive. Several tasks number and
/// send on one channel at once (each player asks for its own code), so their messages may
/// arrive out of order, never by more than the tasks in flight between numbering and sending.
const REPLAY_WINDOW: u64 = 4096;

/// The numbers taken on a channel: each at most once, none [`REPLAY_WINDOW`] or more behind
/// the newest.
#[derive(Debug, Default)]
pub struct Replays(std::sync::Mutex<Window>);

#[derive(Debug)]
struct Window {
    newest: u64,
    /// Bit `n % REPLAY_WINDOW` is set when number `n` of the window was taken.
    taken: Box<[u64]>,
}

impl Default for Window {
    fn default() -> Self {
        Window {
            newest: 0,
            taken: vec![0; (REPLAY_WINDOW / 64) as usize].into_boxed_slice(),
        }
    }
}

impl Window {
    fn slot(seq: u64) -> (usize, u64) {
        let bit = seq % REPLAY_WINDOW;
        ((bit / 64) as usize, 1 << (bit % 64))
    }

    fn take(&mut self, seq: u64) -> bool {
        if seq > self.newest {
            // The slots of the numbers it moves to held numbers too old from now on.
            for new in (self.newest + 1).max(seq.saturating_sub(REPLAY_WINDOW - 1))..=seq {
                let (word, bit) = Self::slot(new);
                self.taken[word] &= !bit;
            }
            self.newest = seq;
        } else if seq == 0 || self.newest - seq >= REPLAY_WINDOW {
            return false;
        }
        let (word, bit) = Self::slot(seq);
        let fresh = self.taken[word] & bit == 0;
        self.taken[word] |= bit;
        fresh
    }
}

impl Replays {
    pub fn take(&self, seq: u64) -> Result<(), SealError> {
        let mut window = crate::sync::lock(&self.0);
        if window.take(seq) {
            Ok(())
        } else {
            Err(SealError::Replayed {
                seq,
                newest: window.newest,
            })
        }
    }
}

/// A nonce for an agent's session: fresh randomness, as hex.
pub fn nonce() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(s: &str) -> Secret {
        Secret::new(s.as_bytes().to_vec()).expect("a secret")
    }

    #[test]
    fn a_sealed_message_opens_only_with_its_key_and_channel() {
        let key = secret("sixteen bytes ok!").run_key("r1");
        let sealed = key.seal(Channel::Offer, 7, b"{\"run\":\"r1\"}");
        assert_eq!(
            key.open(Channel::Offer, &sealed).unwrap(),
            (7, &b"{\"run\":\"r1\"}"[..])
        );
        // Another channel, run, secret, or a changed byte or number: forged.
        assert!(key.open(Channel::Answer, &sealed).is_err());
        assert!(secret("sixteen bytes ok!")
            .run_key("r2")
            .open(Channel::Offer, &sealed)
            .is_err());
        assert!(secret("another secret!!")
            .run_key("r1")
            .open(Channel::Offer, &sealed)
            .is_err());
        let mut changed = sealed.clone();
        *changed.last_mut().unwrap() ^= 1;
        assert!(key.open(Channel::Offer, &changed).is_err());
        let mut renumbered = sealed.clone();
        renumbered[7] = 8;
        assert!(key.open(Channel::Offer, &renumbered).is_err());
        assert!(key.open(Channel::Offer, b"{\"run\":\"r1\"}").is_err());
    }

    #[test]
    fn sessions_differ_by_agent_and_nonce() {
        let s = secret("sixteen bytes ok!");
        let sealed = s.session_key("r", "a", "n1").seal(Channel::Event, 1, b"x");
        assert!(s
            .session_key("r", "a", "n1")
            .open(Channel::Event, &sealed)
            .is_ok());
        assert!(s
            .session_key("r", "b", "n1")
            .open(Channel::Event, &sealed)
            .is_err());
        assert!(s
            .session_key("r", "a", "n2")
            .open(Channel::Event, &sealed)
            .is_err());
    }

    #[test]
    fn a_number_is_taken_once_and_late_only_within_the_window() {
        let seen = Replays::default();
        assert!(seen.take(0).is_err());
        assert!(seen.take(1).is_ok());
        assert!(seen.take(3).is_ok());
        assert!(seen.take(3).is_err());
        // Sent by another task a moment before 3, arriving after it: taken, once.
        assert!(seen.take(2).is_ok());
        assert!(seen.take(2).is_err());
        assert!(seen.take(1).is_err());
        // Far ahead: whatever the window passed is too old, taken or not.
        let far = 3 + REPLAY_WINDOW;
        assert!(seen.take(far).is_ok());
        assert!(seen.take(far - REPLAY_WINDOW).is_err());
        assert!(seen.take(far - REPLAY_WINDOW + 1).is_ok());
        assert!(seen.take(far - REPLAY_WINDOW + 1).is_err());
        assert!(seen.take(far - 1).is_ok());
        assert!(seen.take(far).is_err());
        // A slot reused by a newer number is free for it, not still marked by the old one.
        assert!(seen.take(far + REPLAY_WINDOW - 1).is_ok());
        assert!(seen.take(far + 1).is_ok());
        let numbers = Numbers::default();
        assert_eq!((numbers.next(), numbers.next()), (1, 2));
    }

    #[test]
    fn a_short_or_missing_secret_is_refused() {
        assert!(matches!(
            Secret::new(b"short\n".to_vec()),
            Err(SealError::Short(5))
        ));
        assert!(Secret::new(b"0123456789abcdef\n".to_vec()).is_ok());
    }
}
