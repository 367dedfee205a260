//! Multimodal encoder-cache affinity: upstream's `mm-embeddings-cache-producer` and
//! `mm-embeddings-cache-scorer`.
//!
//! A model server that already encoded an image (or an audio or video clip) keeps its
//! embeddings in an encoder cache, and a request reusing the item is served without encoding
//! it again. The producer remembers, per endpoint, the media items recently sent there (a
//! bounded LRU of item hashes, [`EncoderCache`]); the scorer gives each candidate the share of
//! the request's distinct items it is believed to hold.
//!
//! Items are read from chat-completions content parts, as the parser renders them
//! (`<|image|>URL`, `<|audio|>…`, `<|video|>…`, `<|file|>…`, with inline data reduced to its
//! hash): one item per distinct media part, keyed by the xxh3 hash of that rendering.
//! Upstream reads the multimodal features its `token-producer` found, falling back to the same
//! typed chat-completions media blocks. A request with no media part has no items, and every
//! candidate scores 0, as upstream.
//!
//! ```
//! use shepherd_scheduler_core::endpoint::EndpointId;
//! use shepherd_scheduler_core::request::{parse_openai_request, ParseLimits};
//! use shepherd_scorers::multimodal::{EncoderCache, media_items};
//!
//! let body = br#"{"model":"m","messages":[{"role":"user","content":[
//!     {"type":"text","text":"what is this?"},
//!     {"type":"image_url","image_url":{"url":"https://example.com/cat.png"}},
//!     {"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]}"#;
//! let request = parse_openai_request("/v1/chat/completions", body, &ParseLimits::default()).unwrap();
//! let items = media_items(&request);
//! assert_eq!(items.len(), 1); // the same image twice counts once
//! assert_eq!(items[0].modality, "image");
//!
//! let cache = EncoderCache::new(2048);
//! assert_eq!(cache.matched(EndpointId(0), &items), 0);
//! cache.record(EndpointId(0), &items);
//! assert_eq!(cache.matched(EndpointId(0), &items), 1);
//! assert_eq!(cache.matched(EndpointId(1), &items), 0);
//! ```

mod lru;
pub mod producer;
pub mod scorer;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use ahash::AHashMap;
use parking_lot::RwLock;
use shepherd_scheduler_core::endpoint::{EndpointId, MembershipListener};
use shepherd_scheduler_core::metrics::{MetricDesc, MetricsSource, MetricsVisitor};
use shepherd_scheduler_core::request::InferenceRequest;

use lru::HashLru;

/// The [`Resources`](shepherd_scheduler_core::resources::Resources) name of the cache a
/// producer named `producer` keeps (and a scorer naming that producer reads).
pub fn cache_resource_name(producer: &str) -> String {
    format!("shepherd.mm-embeddings-cache/{producer}")
}

/// Most media items read from one request (more are not tracked).
pub const MAX_ITEMS_PER_REQUEST: usize = 64;

/// One distinct media item of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaItem {
    /// The xxh3 hash of the part's rendering.
    pub hash: u64,
    /// `image`, `audio`, `video` or `file`.
    pub modality: &'static str,
}

const MODALITIES: [&str; 4] = ["image", "audio", "video", "file"];

/// The request's distinct media items, in the order first seen (at most
/// [`MAX_ITEMS_PER_REQUEST`]): the chat-completions content parts that are media, as the
/// parser rendered them. Text parts, and messages without media, give none.
pub fn media_items(request: &InferenceRequest) -> Vec<MediaItem> {
    let mut items: Vec<MediaItem> = Vec::new();
    let Some(chat) = request.chat.as_deref() else {
        return items;
    };
    for message in chat.messages.iter().filter(|m| m.has_media) {
        if message.parts.is_none() {
            continue;
        }
        for part in message.part_texts() {
            let Some(modality) = modality_of(part) else {
                continue;
            };
            let hash = xxhash_rust::xxh3::xxh3_64(part.as_bytes());
            if items.iter().any(|i| i.hash == hash) {
                continue;
            }
            if items.len() == MAX_ITEMS_PER_REQUEST {
                return items;
            }
            items.push(MediaItem { hash, modality });
        }
    }
    items
}

/// The modality of a rendered media part (`<|image|>…`), `None` for text.
fn modality_of(part: &str) -> Option<&'static str> {
    let tag = part.strip_prefix("<|")?;
    MODALITIES.into_iter().find(|m| {
        tag.strip_prefix(m)
            .is_some_and(|rest| rest.starts_with("|>"))
    })
}

/// Per endpoint, the media item hashes recently sent there: an LRU of `capacity` hashes each.
/// Endpoints that leave the pool are forgotten.
///
/// As a [`MetricsSource`] (exported by the producer, labelled `plugin`):
/// `shepherd_mm_cache_items_routed_total` (media items sent to a picked server),
/// `shepherd_mm_cache_items_hit_total` (those the server was believed to hold already) and
/// `shepherd_mm_cache_entries` (hashes held over all endpoints).
#[derive(Debug)]
pub struct EncoderCache {
    name: String,
    capacity: AtomicUsize,
    endpoints: RwLock<AHashMap<EndpointId, HashLru>>,
    routed: AtomicU64,
    hits: AtomicU64,
}

const ROUTED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_mm_cache_items_routed_total",
    "Media items (images, audio, video, files) sent to a picked server.",
);
const HITS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_mm_cache_items_hit_total",
    "Media items sent to a server believed to hold them in its encoder cache already.",
);
const ENTRIES: MetricDesc<'static> = MetricDesc::new(
    "shepherd_mm_cache_entries",
    "Media item hashes the encoder-cache producer holds, over all endpoints.",
);

impl EncoderCache {
    /// An empty cache of `capacity` hashes per endpoint.
    pub fn new(capacity: usize) -> Self {
        Self::named(producer::TYPE_NAME, capacity)
    }

    /// An empty cache of the producer `name`, of `capacity` hashes per endpoint.
    pub fn named(name: &str, capacity: usize) -> Self {
        EncoderCache {
            name: name.to_string(),
            capacity: AtomicUsize::new(capacity.max(1)),
            endpoints: RwLock::new(AHashMap::new()),
            routed: AtomicU64::new(0),
            hits: AtomicU64::new(0),
        }
    }

    /// Items sent to picked servers, and how many of them the server already held.
    pub fn routed_and_hits(&self) -> (u64, u64) {
        (
            self.routed.load(Ordering::Relaxed),
            self.hits.load(Ordering::Relaxed),
        )
    }

    /// Hashes held per endpoint.
    pub fn capacity(&self) -> usize {
        self.capacity.load(Ordering::Relaxed)
    }

    /// Sets the per-endpoint capacity (a reload with another `cacheSizeInMBPerServer`),
    /// forgetting the oldest hashes over it.
    pub fn set_capacity(&self, capacity: usize) {
        let capacity = capacity.max(1);
        if self.capacity.swap(capacity, Ordering::Relaxed) != capacity {
            for lru in self.endpoints.write().values_mut() {
                lru.resize(capacity);
            }
        }
    }

    /// How many of `items` `endpoint` is believed to hold.
    pub fn matched(&self, endpoint: EndpointId, items: &[MediaItem]) -> usize {
        let endpoints = self.endpoints.read();
        endpoints.get(&endpoint).map_or(0, |lru| {
            items.iter().filter(|i| lru.contains(i.hash)).count()
        })
    }

    /// Records that `endpoint` was sent `items`.
    pub fn record(&self, endpoint: EndpointId, items: &[MediaItem]) {
        if items.is_empty() {
            return;
        }
        let capacity = self.capacity();
        let mut endpoints = self.endpoints.write();
        let lru = endpoints
            .entry(endpoint)
            .or_insert_with(|| HashLru::new(capacity));
        let mut hits = 0;
        for item in items {
            hits += u64::from(lru.contains(item.hash));
            lru.add(item.hash);
        }
        self.routed.fetch_add(items.len() as u64, Ordering::Relaxed);
        self.hits.fetch_add(hits, Ordering::Relaxed);
    }

    /// Hashes held for `endpoint`.
    pub fn len_of(&self, endpoint: EndpointId) -> usize {
        self.endpoints.read().get(&endpoint).map_or(0, HashLru::len)
    }

    /// Endpoints with hashes held.
    pub fn endpoints(&self) -> usize {
        self.endpoints.read().len()
    }
}

impl MetricsSource for EncoderCache {
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        let labels = [("plugin", self.name.as_str())];
        let (routed, hits) = self.routed_and_hits();
        v.counter(ROUTED, &labels, routed);
        v.counter(HITS, &labels, hits);
        let entries: usize = self.endpoints.read().values().map(HashLru::len).sum();
        v.gauge(ENTRIES, &labels, entries as f64);
    }
}

impl MembershipListener for EncoderCache {
    fn on_removed(&self, removed: &[EndpointId]) {
        let mut endpoints = self.endpoints.write();
        for id in removed {
            endpoints.remove(id);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use shepherd_scheduler_core::request::{ParseLimits, parse_openai_request};

    fn chat(content: &str) -> InferenceRequest {
        let body = format!(r#"{{"model":"m","messages":[{{"role":"user","content":{content}}}]}}"#);
        parse_openai_request(
            "/v1/chat/completions",
            body.as_bytes(),
            &ParseLimits::default(),
        )
        .unwrap()
    }

    #[test]
    fn every_modality_and_inline_data_give_items() {
        let request = chat(
            r#"[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},
                {"type":"input_audio","input_audio":{"data":"UklGR","format":"wav"}},
                {"type":"video_url","video_url":{"url":"https://x/v.mp4"}},
                {"type":"text","text":"describe"}]"#,
        );
        let modalities: Vec<_> = media_items(&request).iter().map(|i| i.modality).collect();
        assert_eq!(modalities, ["image", "audio", "video"]);
    }

    #[test]
    fn text_only_requests_have_no_items() {
        assert!(media_items(&chat(r#""hello""#)).is_empty());
        assert!(media_items(&chat(r#"[{"type":"text","text":"<|image|>x"}]"#)).is_empty());
    }

    #[test]
    fn distinct_images_are_distinct_items_and_capped() {
        let parts: Vec<String> = (0..100)
            .map(|i| format!(r#"{{"type":"image_url","image_url":{{"url":"https://x/{i}.png"}}}}"#))
            .collect();
        let request = chat(&format!("[{}]", parts.join(",")));
        assert_eq!(media_items(&request).len(), MAX_ITEMS_PER_REQUEST);
    }

    #[test]
    fn removed_endpoints_are_forgotten_and_capacity_shrinks() {
        let request = chat(
            r#"[{"type":"image_url","image_url":{"url":"https://x/a.png"}},
                {"type":"image_url","image_url":{"url":"https://x/b.png"}}]"#,
        );
        let items = media_items(&request);
        let cache = EncoderCache::new(8);
        cache.record(EndpointId(3), &items);
        cache.record(EndpointId(4), &items);
        assert_eq!(cache.matched(EndpointId(3), &items), 2);
        cache.record(EndpointId(3), &items[..1]);
        assert_eq!(cache.routed_and_hits(), (5, 1));
        cache.set_capacity(1);
        assert_eq!(cache.len_of(EndpointId(3)), 1);
        cache.on_removed(&[EndpointId(3)]);
        assert_eq!(cache.matched(EndpointId(3), &items), 0);
        assert_eq!(cache.endpoints(), 1);
    }
}
