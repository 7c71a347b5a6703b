//! Toxiproxy 2.x's shapes (its proxies, toxics and errors as JSON) and what each toxic is on the
//! fault proxy. Pure: reading a request's JSON never touches a proxy.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::proxy::{Latency, LinkFault, Ways};

/// An error as Toxiproxy answers it: `{"error": "...", "status": N}` with that HTTP status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{error}")]
pub struct ApiError {
    pub error: String,
    pub status: u16,
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError {
            error: message.into(),
            status: 400,
        }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError {
            error: message.into(),
            status: 404,
        }
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        ApiError {
            error: message.into(),
            status: 409,
        }
    }

    pub fn proxy_not_found() -> Self {
        ApiError::not_found("proxy not found")
    }

    pub fn toxic_not_found() -> Self {
        ApiError::not_found("toxic not found")
    }
}

/// A proxy as `GET /proxies/{name}` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ProxyJson {
    pub name: String,
    pub listen: String,
    pub upstream: String,
    pub enabled: bool,
    pub toxics: Vec<ToxicJson>,
}

/// A toxic as Toxiproxy shows it (and as the history records it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToxicJson {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub stream: String,
    pub toxicity: f32,
    pub attributes: Value,
}

impl ToxicJson {
    /// `reset_peer_downstream: downstream, timeout=500, toxicity 0.5` (toxicity when below 1).
    pub fn details(&self) -> String {
        let mut text = format!("{}: {}", self.name, self.stream);
        if let Value::Object(attributes) = &self.attributes {
            for (key, value) in attributes {
                text.push_str(&format!(", {key}={value}"));
            }
        }
        if self.toxicity < 1.0 {
            text.push_str(&format!(", toxicity {}", self.toxicity));
        }
        text
    }
}

/// Toxiproxy's toxic types, each with its attribute names (all whole numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToxicType {
    /// `latency`, `jitter` (ms).
    Latency,
    /// `rate` (KB/s, 1 KB = 1000 bytes).
    Bandwidth,
    /// `delay` (ms).
    SlowClose,
    /// `timeout` (ms; 0: never closed).
    Timeout,
    /// `timeout` (ms).
    ResetPeer,
    /// `average_size`, `size_variation` (bytes), `delay` (µs).
    Slicer,
    /// `bytes`.
    LimitData,
}

impl ToxicType {
    const ALL: [ToxicType; 7] = [
        ToxicType::Latency,
        ToxicType::Bandwidth,
        ToxicType::SlowClose,
        ToxicType::Timeout,
        ToxicType::ResetPeer,
        ToxicType::Slicer,
        ToxicType::LimitData,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ToxicType::Latency => "latency",
            ToxicType::Bandwidth => "bandwidth",
            ToxicType::SlowClose => "slow_close",
            ToxicType::Timeout => "timeout",
            ToxicType::ResetPeer => "reset_peer",
            ToxicType::Slicer => "slicer",
            ToxicType::LimitData => "limit_data",
        }
    }

    fn fields(self) -> &'static [&'static str] {
        match self {
            ToxicType::Latency => &["latency", "jitter"],
            ToxicType::Bandwidth => &["rate"],
            ToxicType::SlowClose => &["delay"],
            ToxicType::Timeout | ToxicType::ResetPeer => &["timeout"],
            ToxicType::Slicer => &["average_size", "size_variation", "delay"],
            ToxicType::LimitData => &["bytes"],
        }
    }

    pub fn parse(name: &str) -> Result<ToxicType, ApiError> {
        ToxicType::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| ApiError::bad_request("invalid toxic type"))
    }
}

/// A toxic's attributes, in its type's field order; a field not given is 0, as in Toxiproxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attributes {
    kind: ToxicType,
    values: [u64; 3],
}

impl Attributes {
    /// Reads `json` (an object, or absent) over `base`: an update keeps what it does not name.
    /// Names other than the type's are ignored, as Toxiproxy ignores them.
    pub fn read(
        kind: ToxicType,
        json: Option<&Value>,
        base: Option<Attributes>,
    ) -> Result<Attributes, ApiError> {
        let mut values = base.map(|b| b.values).unwrap_or_default();
        let given = match json {
            None | Some(Value::Null) => &Map::new(),
            Some(Value::Object(map)) => map,
            Some(_) => return Err(ApiError::bad_request("bad request body: attributes")),
        };
        for (slot, field) in values.iter_mut().zip(kind.fields()) {
            if let Some(value) = given.get(*field) {
                *slot = value.as_u64().ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "bad request body: {} `{field}` is a whole number, at least 0, not {value}",
                        kind.name()
                    ))
                })?;
            }
        }
        let attributes = Attributes { kind, values };
        attributes.fault()?;
        Ok(attributes)
    }

    pub fn kind(&self) -> ToxicType {
        self.kind
    }

    pub fn to_json(&self) -> Value {
        let fields = self.kind.fields().iter().zip(self.values);
        Value::Object(fields.map(|(f, v)| ((*f).to_owned(), v.into())).collect())
    }

    /// The fault the proxy applies for this toxic. Refuses what it cannot do as Toxiproxy does.
    pub fn fault(&self) -> Result<LinkFault, ApiError> {
        let [a, b, c] = self.values;
        let ms = Duration::from_millis;
        let fault = match self.kind {
            ToxicType::Latency => LinkFault::Latency(Latency::new(ms(a), ms(b))),
            ToxicType::Bandwidth => {
                // 1 KB/s is 8 kbps; Toxiproxy's 0 is no limit, which is no toxic here.
                let kbps = a
                    .checked_mul(8)
                    .and_then(|kbps| u32::try_from(kbps).ok())
                    .filter(|kbps| *kbps > 0)
                    .ok_or_else(|| {
                        ApiError::bad_request(
                            "bandwidth `rate` is KB/s, from 1 to 536870911 (0 is no limit: remove the toxic)",
                        )
                    })?;
                LinkFault::Bandwidth { kbps }
            }
            ToxicType::SlowClose => LinkFault::SlowClose { delay: ms(a) },
            ToxicType::Timeout => LinkFault::Timeout {
                after: (a > 0).then(|| ms(a)),
                reset: false,
            },
            ToxicType::ResetPeer => LinkFault::Timeout {
                after: Some(ms(a)),
                reset: true,
            },
            ToxicType::Slicer => {
                let size = |n: u64, field: &str| {
                    usize::try_from(n)
                        .map_err(|_| ApiError::bad_request(format!("slicer `{field}` is too big")))
                };
                LinkFault::Slicer {
                    bytes: size(a.max(1), "average_size")?,
                    variation: size(b, "size_variation")?,
                    delay: Duration::from_micros(c),
                }
            }
            ToxicType::LimitData => LinkFault::LimitData { bytes: a },
        };
        Ok(fault)
    }
}

/// `stream`: `upstream` is client to upstream (the proxy's `Up`), `downstream` back; Toxiproxy's
/// default is downstream.
pub fn parse_stream(stream: Option<&str>) -> Result<Ways, ApiError> {
    match stream.map(str::to_ascii_lowercase).as_deref() {
        None | Some("downstream") => Ok(Ways::Down),
        Some("upstream") => Ok(Ways::Up),
        Some(_) => Err(ApiError::bad_request(
            "stream was invalid, can be either upstream or downstream",
        )),
    }
}

pub fn stream_name(ways: Ways) -> &'static str {
    match ways {
        Ways::Up => "upstream",
        _ => "downstream",
    }
}

/// `toxicity`: the share of connections hit, 0 to 1 (default 1).
pub fn parse_toxicity(value: Option<&Value>, base: f32) -> Result<f32, ApiError> {
    let Some(value) = value else {
        return Ok(base);
    };
    match value.as_f64() {
        Some(share) if (0.0..=1.0).contains(&share) => Ok(share as f32),
        _ => Err(ApiError::bad_request(format!(
            "bad request body: toxicity is a share from 0 to 1, not {value}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn attributes_map_onto_the_proxys_faults() {
        let read = |kind, json: Value| Attributes::read(kind, Some(&json), None);
        let latency = read(ToxicType::Latency, json!({"latency": 100, "jitter": 5})).unwrap();
        assert_eq!(
            latency.fault().unwrap(),
            LinkFault::Latency(Latency::new(
                Duration::from_millis(100),
                Duration::from_millis(5)
            ))
        );
        assert_eq!(latency.to_json(), json!({"latency": 100, "jitter": 5}));
        let bandwidth = read(ToxicType::Bandwidth, json!({"rate": 16})).unwrap();
        assert_eq!(
            bandwidth.fault().unwrap(),
            LinkFault::Bandwidth { kbps: 128 }
        );
        let timeout = read(ToxicType::Timeout, json!({"timeout": 0})).unwrap();
        assert_eq!(
            timeout.fault().unwrap(),
            LinkFault::Timeout {
                after: None,
                reset: false
            }
        );
        let reset = read(ToxicType::ResetPeer, json!({})).unwrap();
        assert_eq!(reset.to_json(), json!({"timeout": 0}));
        assert_eq!(
            reset.fault().unwrap(),
            LinkFault::Timeout {
                after: Some(Duration::ZERO),
                reset: true
            }
        );
        let slicer = read(
            ToxicType::Slicer,
            json!({"average_size": 64, "size_variation": 8, "delay": 1500, "other": "x"}),
        )
        .unwrap();
        assert_eq!(
            slicer.fault().unwrap(),
            LinkFault::Slicer {
                bytes: 64,
                variation: 8,
                delay: Duration::from_micros(1500)
            }
        );
    }

    #[test]
    fn an_update_keeps_what_it_does_not_name_and_bad_values_are_refused() {
        let first = Attributes::read(
            ToxicType::Latency,
            Some(&json!({"latency": 100, "jitter": 5})),
            None,
        )
        .unwrap();
        let second = Attributes::read(
            ToxicType::Latency,
            Some(&json!({"latency": 300})),
            Some(first),
        )
        .unwrap();
        assert_eq!(second.to_json(), json!({"latency": 300, "jitter": 5}));
        for bad in [json!({"latency": -1}), json!({"latency": "1s"}), json!([1])] {
            let error = Attributes::read(ToxicType::Latency, Some(&bad), None).unwrap_err();
            assert_eq!(error.status, 400, "{bad}");
        }
        assert_eq!(
            Attributes::read(ToxicType::Bandwidth, Some(&json!({"rate": 0})), None)
                .unwrap_err()
                .status,
            400
        );
        assert_eq!(ToxicType::parse("nope").unwrap_err().status, 400);
    }

    #[test]
    fn streams_and_toxicity_read_as_toxiproxy_reads_them() {
        assert_eq!(parse_stream(None).unwrap(), Ways::Down);
        assert_eq!(parse_stream(Some("UpStream")).unwrap(), Ways::Up);
        assert_eq!(parse_stream(Some("both")).unwrap_err().status, 400);
        assert_eq!(parse_toxicity(None, 1.0).unwrap(), 1.0);
        assert_eq!(parse_toxicity(Some(&json!(0.5)), 1.0).unwrap(), 0.5);
        assert_eq!(
            parse_toxicity(Some(&json!(2)), 1.0).unwrap_err().status,
            400
        );
    }
}
