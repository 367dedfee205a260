//! Finding a response's token `usage` without buffering the response, for the adapters that
//! see response bodies go by.
//!
//! OpenAI-compatible servers report usage in two places: at the end of a JSON response
//! (`{"id":…,"choices":[…],"usage":{"prompt_tokens":…}}`), and, when streaming with
//! `stream_options.include_usage`, in the last SSE event before `data: [DONE]`
//! (`data: {"choices":[],"usage":{…}}`). Either way it sits near the *end* of the body. So
//! the scanner keeps only the last `capacity` bytes of the body as it streams through (a
//! generation of any length costs the same small buffer, and each byte is copied a bounded
//! number of times), and when the response ends it looks in that tail for the last `"usage"`
//! key whose value is an object. A `"usage": null` (streams without `include_usage`) or no
//! usage at all gives `None`. The Responses API's `input_tokens` / `output_tokens` are read
//! too, and so are the other APIs the parsers take: Anthropic's messages usage (whose
//! `input_tokens` count only the uncached part: `cache_read_input_tokens` and
//! `cache_creation_input_tokens` are added to the prompt, the first is the cached part) and
//! SGLang's native `"meta_info"` (`prompt_tokens`, `completion_tokens`, `cached_tokens`).
//!
//! ```
//! use shepherd_runtime::usage::UsageScanner;
//!
//! let mut scanner = UsageScanner::new(4096);
//! scanner.push(b"data: {\"choices\":[{\"text\":\"Hi\"}],\"usage\":null}\n\n");
//! scanner.push(b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2,");
//! scanner.push(b"\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\ndata: [DONE]\n\n");
//! let usage = scanner.usage().unwrap();
//! assert_eq!((usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens), (7, 2, Some(4)));
//! ```

use serde_json::Value;
use shepherd_scheduler_core::completion::Usage;

/// Default bytes of a body's end kept: a usage object with details fits many times over.
pub const DEFAULT_USAGE_SCAN_BYTES: usize = 16 * 1024;

/// The keys whose object value holds usage: OpenAI's, Anthropic's and vLLM's `usage`,
/// SGLang's native `meta_info`.
const KEYS: [&[u8]; 2] = [b"\"usage\"", b"\"meta_info\""];

/// The bounded tail of a response body, and the usage found in it. See the
/// [module docs](self).
#[derive(Debug, Clone)]
pub struct UsageScanner {
    /// Holds at most `2 × capacity` bytes; only the last `capacity` count.
    tail: Vec<u8>,
    capacity: usize,
    seen: u64,
}

impl Default for UsageScanner {
    fn default() -> Self {
        UsageScanner::new(DEFAULT_USAGE_SCAN_BYTES)
    }
}

impl UsageScanner {
    /// A scanner keeping the last `capacity` bytes (at least 256). Nothing is allocated until
    /// the first chunk.
    pub fn new(capacity: usize) -> Self {
        UsageScanner {
            tail: Vec::new(),
            capacity: capacity.max(256),
            seen: 0,
        }
    }

    /// Feeds the next body chunk.
    pub fn push(&mut self, chunk: &[u8]) {
        self.seen = self.seen.saturating_add(chunk.len() as u64);
        if chunk.len() >= self.capacity {
            self.tail.clear();
            self.tail
                .extend_from_slice(&chunk[chunk.len() - self.capacity..]);
            return;
        }
        // Let the buffer grow to twice the capacity, then drop all but the last `capacity`
        // bytes at once: each byte is moved at most once more, whatever the chunk sizes.
        if self.tail.len() + chunk.len() > 2 * self.capacity {
            let keep_from = self.tail.len() + chunk.len() - self.capacity;
            self.tail.drain(..keep_from.min(self.tail.len()));
        }
        self.tail.extend_from_slice(chunk);
    }

    /// Body bytes fed so far.
    pub fn bytes_seen(&self) -> u64 {
        self.seen
    }

    /// The bytes kept (the body's end, at most `capacity` of them).
    pub fn tail(&self) -> &[u8] {
        let start = self.tail.len().saturating_sub(self.capacity);
        &self.tail[start..]
    }

    /// The usage reported at the end of the body fed so far, if any.
    pub fn usage(&self) -> Option<Usage> {
        let tail = self.tail();
        let mut end = tail.len();
        // The last "usage" key whose value is an object wins; earlier ones (cumulative
        // per-chunk usage) are older.
        while let Some((at, key)) = KEYS
            .iter()
            .filter_map(|key| rfind(&tail[..end], key).map(|at| (at, key.len())))
            .max_by_key(|&(at, _)| at)
        {
            end = at;
            // A `\"usage\"` inside a JSON string is escaped: not a key.
            if at > 0 && tail[at - 1] == b'\\' {
                continue;
            }
            let rest = skip_ws(&tail[at + key..]);
            let Some(rest) = rest.strip_prefix(b":") else {
                continue;
            };
            let rest = skip_ws(rest);
            if rest.first() != Some(&b'{') {
                continue;
            }
            let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<Value>();
            if let Some(Ok(value)) = values.next()
                && let Some(usage) = usage_from(&value)
            {
                return Some(usage);
            }
        }
        None
    }
}

fn usage_from(value: &Value) -> Option<Usage> {
    let object = value.as_object()?;
    let count = |v: Option<&Value>| v.and_then(Value::as_u64);
    let prompt_tokens = count(object.get("prompt_tokens").or(object.get("input_tokens")));
    let completion_tokens = count(
        object
            .get("completion_tokens")
            .or(object.get("output_tokens")),
    );
    if prompt_tokens.is_none() && completion_tokens.is_none() {
        return None;
    }
    // Anthropic: `input_tokens` is the uncached part of the prompt.
    let cache_read = count(object.get("cache_read_input_tokens"));
    let cache_creation = count(object.get("cache_creation_input_tokens"));
    let cached_tokens = ["prompt_tokens_details", "input_tokens_details"]
        .iter()
        .find_map(|k| count(object.get(*k).and_then(|d| d.get("cached_tokens"))))
        .or(count(object.get("cached_tokens")))
        .or(cache_read);
    let prompt_tokens = prompt_tokens
        .unwrap_or(0)
        .saturating_add(cache_read.unwrap_or(0))
        .saturating_add(cache_creation.unwrap_or(0));
    Some(Usage {
        prompt_tokens,
        completion_tokens: completion_tokens.unwrap_or(0),
        cached_tokens,
    })
}

fn rfind(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .rposition(|window| window == needle)
}

fn skip_ws(bytes: &[u8]) -> &[u8] {
    let n = bytes.iter().take_while(|b| b.is_ascii_whitespace()).count();
    &bytes[n..]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn json_body_usage() {
        let mut s = UsageScanner::new(1024);
        s.push(br#"{"id":"x","choices":[{"text":"the \"usage\": {} field"}],"usage":{"prompt_tokens":3,"total_tokens":8,"completion_tokens":5},"kv_transfer_params":null}"#);
        assert_eq!(
            s.usage(),
            Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 5,
                cached_tokens: None
            })
        );
    }

    #[test]
    fn only_the_tail_is_kept() {
        let mut s = UsageScanner::new(256);
        let event = b"data: {\"choices\":[{\"text\":\"token\"}]}\n\n";
        for _ in 0..1000 {
            s.push(event);
            assert!(s.tail.len() <= 512);
        }
        assert_eq!(s.tail().len(), 256);
        assert_eq!(s.usage(), None);
        let last = b"data: {\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1000}}\n\n";
        s.push(last);
        assert_eq!(s.usage().unwrap().completion_tokens, 1000);
        assert_eq!(s.bytes_seen(), (1000 * event.len() + last.len()) as u64);
    }

    #[test]
    fn the_tail_is_the_bodys_end_whatever_the_chunking() {
        let body: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        for chunk in [1, 7, 255, 256, 300, 511, 4096] {
            let mut s = UsageScanner::new(256);
            for piece in body.chunks(chunk) {
                s.push(piece);
            }
            assert_eq!(s.tail(), &body[body.len() - 256..], "chunks of {chunk}");
        }
    }

    #[test]
    fn null_and_missing_usage() {
        let mut s = UsageScanner::new(512);
        s.push(b"data: {\"usage\": null}\n\ndata: [DONE]\n\n");
        assert_eq!(s.usage(), None);
        let mut s = UsageScanner::new(512);
        s.push(b"not json at all \"usage\": {broken");
        assert_eq!(s.usage(), None);
        assert_eq!(UsageScanner::default().usage(), None);
    }

    #[test]
    fn responses_api_usage() {
        let mut s = UsageScanner::default();
        s.push(br#"{"usage":{"input_tokens":9,"output_tokens":4,"input_tokens_details":{"cached_tokens":8}}}"#);
        let usage = s.usage().unwrap();
        assert_eq!((usage.prompt_tokens, usage.completion_tokens), (9, 4));
        assert_eq!(usage.cached_tokens, Some(8));
    }

    #[test]
    fn anthropic_usage_counts_cached_input_in_the_prompt() {
        let mut s = UsageScanner::new(4096);
        s.push(br#"{"type":"message","content":[],"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":2048,"output_tokens":30}}"#);
        let usage = s.usage().unwrap();
        assert_eq!((usage.prompt_tokens, usage.completion_tokens), (2060, 30));
        assert_eq!(usage.cached_tokens, Some(2048));
    }

    #[test]
    fn sglang_meta_info_is_read() {
        let mut s = UsageScanner::new(4096);
        s.push(br#"{"text":"ok","meta_info":{"id":"a","prompt_tokens":40,"completion_tokens":7,"cached_tokens":32,"finish_reason":{"type":"stop"}}}"#);
        let usage = s.usage().unwrap();
        assert_eq!((usage.prompt_tokens, usage.completion_tokens), (40, 7));
        assert_eq!(usage.cached_tokens, Some(32));
        // In a stream the last event's meta_info is the final count.
        let mut s = UsageScanner::new(4096);
        s.push(b"data: {\"text\":\"o\",\"meta_info\":{\"prompt_tokens\":40,\"completion_tokens\":1}}\n\n");
        s.push(b"data: {\"text\":\"ok\",\"meta_info\":{\"prompt_tokens\":40,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n");
        assert_eq!(s.usage().unwrap().completion_tokens, 2);
    }

    #[test]
    fn a_huge_chunk_keeps_its_end() {
        let mut s = UsageScanner::new(256);
        let mut chunk = vec![b' '; 10_000];
        chunk.extend_from_slice(br#""usage":{"prompt_tokens":2,"completion_tokens":3}}"#);
        s.push(&chunk);
        assert_eq!(s.usage().unwrap().prompt_tokens, 2);
    }
}
