//! The native generate APIs that take token ids: vLLM's `/inference/v1/generate` and
//! SGLang's `/generate`.
//!
//! | | vLLM | SGLang |
//! |---|---|---|
//! | prompt | `token_ids` (required, not empty) | `input_ids` (required, not empty; one prompt, not a batch) |
//! | model | `model` when it is a string (else none) | none |
//! | output limit | `sampling_params.max_tokens` | `sampling_params.max_new_tokens` |
//! | stream | `stream` when it is a boolean | `stream` when it is a boolean |
//!
//! Token ids must be integers in `0..2^32`; an id that is not names its place
//! (`token_ids[2]`). The output limit is read when it is a whole non-negative number and
//! ignored otherwise. SGLang's `extra_key` must be a string (a per-prompt list is refused).
//! Other fields (`cache_salt`, multimodal `features`, sampling settings) are left for the
//! model server. A key given twice keeps its last value.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::keys::{Key, KeySeed};
use super::trail::{Segment, Trail};
use super::{ApiKind, ParseLimits, field_error, new_request, object_text};
use crate::request::{InferenceRequest, ParseError, Prompt};

const VLLM_KEYS: &[&str] = &["token_ids", "model", "stream", "sampling_params"];
const SGLANG_KEYS: &[&str] = &["input_ids", "stream", "sampling_params", "extra_key"];

/// What a generate body said.
#[derive(Debug, Default)]
struct GenerateFields {
    tokens: Option<Vec<u32>>,
    model: Option<String>,
    stream: Option<bool>,
    max_tokens: Option<u32>,
}

/// Parses a generate body of `api` ([`ApiKind::VllmGenerate`] or
/// [`ApiKind::SglangGenerate`]), already size-checked.
pub(in crate::request) fn parse_generate(
    api: ApiKind,
    body: &[u8],
    limits: &ParseLimits,
) -> Result<InferenceRequest, ParseError> {
    let sglang = match api {
        ApiKind::VllmGenerate => false,
        ApiKind::SglangGenerate => true,
        other => return Err(ParseError::UnsupportedPath(other.as_str().into())),
    };
    let text = object_text(body)?;
    let mut trail = Trail::default();
    let mut de = serde_json::Deserializer::from_str(text);
    let fields = GenerateSeed {
        sglang,
        trail: &mut trail,
    }
    .deserialize(&mut de)
    .and_then(|fields| de.end().map(|()| fields))
    .map_err(|e| field_error(&e, &trail))?;

    let tokens = fields
        .tokens
        .ok_or(ParseError::MissingField(api.prompt_field()))?;
    if tokens.is_empty() {
        return Err(ParseError::EmptyPrompt);
    }
    let mut request = new_request(
        api,
        fields.model.unwrap_or_default(),
        Prompt::Tokens(tokens),
        limits,
    );
    request.stream = fields.stream.unwrap_or(false);
    request.max_tokens = fields.max_tokens;
    request.body_size = body.len();
    Ok(request)
}

struct GenerateSeed<'t> {
    sglang: bool,
    trail: &'t mut Trail,
}

impl<'de> DeserializeSeed<'de> for GenerateSeed<'_> {
    type Value = GenerateFields;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for GenerateSeed<'_> {
    type Value = GenerateFields;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a generate request object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<GenerateFields, A::Error> {
        let (keys, limit_key) = if self.sglang {
            (SGLANG_KEYS, "max_new_tokens")
        } else {
            (VLLM_KEYS, "max_tokens")
        };
        let mut fields = GenerateFields::default();
        while let Some(key) = map.next_key_seed(KeySeed(keys))? {
            let Key::Known(name) = key else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            let result = match name {
                "token_ids" | "input_ids" => map
                    .next_value_seed(TokenIdsSeed(&mut *self.trail))
                    .map(|tokens| fields.tokens = tokens),
                "model" => map
                    .next_value::<serde_json::Value>()
                    .map(|v| fields.model = v.as_str().map(str::to_owned)),
                "stream" => map
                    .next_value::<serde_json::Value>()
                    .map(|v| fields.stream = v.as_bool()),
                "sampling_params" => map
                    .next_value::<serde_json::Value>()
                    .map(|v| fields.max_tokens = whole_count(v.get(limit_key))),
                _ => match map.next_value::<serde_json::Value>() {
                    // "extra_key"
                    Ok(serde_json::Value::String(_) | serde_json::Value::Null) => Ok(()),
                    Ok(_) => Err(A::Error::custom("must be a string")),
                    Err(e) => Err(e),
                },
            };
            self.trail.note(Segment::Key(name), result)?;
        }
        Ok(fields)
    }
}

/// A whole non-negative number, saturated to `u32`; `None` for anything else.
fn whole_count(value: Option<&serde_json::Value>) -> Option<u32> {
    let value = value?;
    if let Some(n) = value.as_u64() {
        return Some(u32::try_from(n).unwrap_or(u32::MAX));
    }
    let f = value.as_f64()?;
    if f >= 0.0 && f.fract() == 0.0 {
        // In range and whole: the saturating conversion is exact up to u32::MAX.
        Some(f.min(f64::from(u32::MAX)) as u32)
    } else {
        None
    }
}

/// A flat array of token ids (`null` counts as absent).
struct TokenIdsSeed<'t>(&'t mut Trail);

impl<'de> DeserializeSeed<'de> for TokenIdsSeed<'_> {
    type Value = Option<Vec<u32>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TokenIdsSeed<'_> {
    type Value = Option<Vec<u32>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of token ids")
    }

    fn visit_unit<E: Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut tokens = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
        loop {
            let next = seq.next_element::<u32>();
            match self.0.note(Segment::Index(tokens.len()), next)? {
                Some(token) => tokens.push(token),
                None => return Ok(Some(tokens)),
            }
        }
    }
}
