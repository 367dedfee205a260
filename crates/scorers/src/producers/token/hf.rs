//! A Hugging Face tokenizer (`tokenizer.json`), with the segment cache in front of it.
//!
//! # When the cache is exact
//!
//! The `tokenizers` pipeline first cuts the text at its added tokens (`<|eot_id|>`,
//! `<|im_start|>`...: those not marked `normalized`), then normalizes, pre-tokenizes and runs
//! the model on each piece alone: no BPE merge, no normalization and no pre-tokenizer rule
//! crosses an added token. So the ids of a text are the ids of its pieces, in order, with each
//! added token's id between them; the cache keeps the ids of each piece. Chat templates put
//! special tokens between messages (and between a role header and its content), so every
//! message's content is one piece and a conversation's earlier turns are found again.
//!
//! That holds when the cut is the one the tokenizer makes: Shepherd cuts the same way
//! (leftmost-longest over the same tokens) and turns the cache off when an added token that
//! cuts before normalization strips the spaces around it (`lstrip`, `rstrip`) or must be a
//! whole word (`single_word`). A pre-tokenizer that treats the first piece of a text apart
//! from the others (SentencePiece's `Metaspace` with `prepend_scheme: first`) would break
//! it too: on loading, the cached and uncached ids of a probe text that holds every added
//! token are compared, and the cache is turned off if they differ. Completions prompts get the
//! post-processor's tokens (`<|begin_of_text|>`) around their pieces, learned the same way.

use std::path::Path;

use aho_corasick::{AhoCorasick, MatchKind};
use tokenizers::Tokenizer;

use super::cache::{CacheStats, SegmentCache};
use super::error::{TokenizeError, TokenizerLoadError};
use super::prefix_stable::{self, CutRule};
use super::template::ChatTemplate;
use shepherd_scheduler_core::request::ChatMessages;

/// Where the added tokens cut a text.
#[derive(Debug)]
pub(super) struct Splitter {
    pub(super) automaton: AhoCorasick,
    /// The token id of each pattern.
    pub(super) ids: Vec<u32>,
}

/// A loaded tokenizer, its chat template and its cache.
#[derive(Debug)]
pub(super) struct HfTokenizer {
    pub(super) tokenizer: Tokenizer,
    pub(super) splitter: Option<Splitter>,
    /// What `add_special_tokens` puts before and after a sequence.
    pub(super) affixes: Option<(Vec<u32>, Vec<u32>)>,
    pub(super) cache: SegmentCache,
    template: Option<ChatTemplate>,
    /// Where a text may be cut to be tokenized a piece at a time (`None`: only whole; see
    /// `prefix_stable.rs`).
    pub(super) cuts: Option<CutRule>,
}

impl HfTokenizer {
    /// Loads `tokenizer.json` from `path`, with `template` and a cache of `cache_tokens`.
    pub(super) fn load(
        path: &Path,
        template: Option<ChatTemplate>,
        cache_tokens: usize,
    ) -> Result<Self, TokenizerLoadError> {
        let bytes = std::fs::read(path).map_err(|source| TokenizerLoadError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut tokenizer =
            Tokenizer::from_bytes(&bytes).map_err(|source| TokenizerLoadError::Tokenizer {
                path: path.to_owned(),
                source,
            })?;
        // transformers encodes without the file's truncation and padding unless asked to.
        tokenizer
            .with_truncation(None)
            .map_err(|source| TokenizerLoadError::Tokenizer {
                path: path.to_owned(),
                source,
            })?;
        tokenizer.with_padding(None);
        let cuts = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .as_ref()
            .and_then(prefix_stable::check);
        let mut loaded = HfTokenizer {
            splitter: splitter(&tokenizer),
            tokenizer,
            affixes: None,
            cache: SegmentCache::new(cache_tokens),
            template,
            cuts,
        };
        loaded.affixes = loaded.learn_affixes();
        if !loaded.cache_agrees() {
            loaded.splitter = None;
        }
        if loaded.cuts.is_some() && !loaded.stream_agrees() {
            loaded.cuts = None;
        }
        Ok(loaded)
    }

    /// The chat template, when the model has one.
    pub(super) fn template(&self) -> Option<&ChatTemplate> {
        self.template.as_ref()
    }

    /// Whether the segment cache is in use.
    pub(super) fn caching(&self) -> bool {
        self.splitter.is_some() && self.cache.enabled()
    }

    /// The cache's counts.
    pub(super) fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// The ids of `text`, tokenized whole (no cache).
    pub(super) fn encode_whole(
        &self,
        text: &str,
        add_special_tokens: bool,
    ) -> Result<Vec<u32>, TokenizeError> {
        self.tokenizer
            .encode_fast(text, add_special_tokens)
            .map(|encoding| encoding.get_ids().to_vec())
            .map_err(|e| TokenizeError::Encode(e.to_string()))
    }

    /// The ids of `text`: through the cache when it is exact, else whole.
    pub(super) fn encode(
        &self,
        text: &str,
        add_special_tokens: bool,
    ) -> Result<Vec<u32>, TokenizeError> {
        let affixes = match (add_special_tokens, &self.affixes) {
            (false, _) => None,
            (true, Some(affixes)) => Some(affixes),
            (true, None) => return self.encode_whole(text, true),
        };
        match &self.splitter {
            Some(splitter) if self.cache.enabled() => {
                self.encode_pieces(splitter, text, affixes, &self.cache)
            }
            _ => self.encode_whole(text, add_special_tokens),
        }
    }

    fn encode_pieces(
        &self,
        splitter: &Splitter,
        text: &str,
        affixes: Option<&(Vec<u32>, Vec<u32>)>,
        cache: &SegmentCache,
    ) -> Result<Vec<u32>, TokenizeError> {
        let mut ids = Vec::with_capacity(text.len() / 3 + 4);
        if let Some((prefix, _)) = affixes {
            ids.extend_from_slice(prefix);
        }
        let piece = |piece: &str, ids: &mut Vec<u32>| {
            let piece_ids =
                cache.get_or_tokenize(piece, |piece| self.encode_whole(piece, false))?;
            ids.extend_from_slice(&piece_ids);
            Ok::<(), TokenizeError>(())
        };
        let mut at = 0;
        for found in splitter.automaton.find_iter(text) {
            if found.start() > at {
                piece(&text[at..found.start()], &mut ids)?;
            }
            ids.extend(splitter.ids.get(found.pattern().as_usize()).copied());
            at = found.end();
        }
        if at < text.len() {
            piece(&text[at..], &mut ids)?;
        }
        if let Some((_, suffix)) = affixes {
            ids.extend_from_slice(suffix);
        }
        Ok(ids)
    }

    /// The prompt ids of a chat conversation: the template's text, without added special
    /// tokens (the template writes them), as vLLM's chat default `add_special_tokens=False`.
    pub(super) fn encode_chat(&self, chat: &ChatMessages) -> Result<Vec<u32>, TokenizeError> {
        let template = self.template().ok_or(TokenizeError::NoChatTemplate)?;
        let text = template.render(chat)?;
        self.encode(&text, false)
    }

    /// What `add_special_tokens` adds around any text, when it is a fixed prefix and suffix.
    fn learn_affixes(&self) -> Option<(Vec<u32>, Vec<u32>)> {
        let mut learned: Option<(Vec<u32>, Vec<u32>)> = None;
        // Non-empty probes: around nothing, a prefix and a suffix look alike.
        for probe in ["Hello world", " a\nb 12", "x"] {
            let plain = self.encode_whole(probe, false).ok()?;
            let special = self.encode_whole(probe, true).ok()?;
            let start = (0..=special.len().saturating_sub(plain.len()))
                .find(|&at| special.get(at..at + plain.len()) == Some(&plain[..]))?;
            let affixes = (
                special[..start].to_vec(),
                special[start + plain.len()..].to_vec(),
            );
            match &learned {
                Some(known) if *known != affixes => return None,
                _ => learned = Some(affixes),
            }
        }
        learned
    }

    /// A text holding every added token between words, spaces, digits and accents.
    pub(super) fn probe_text(&self) -> String {
        let mut probe = String::from("  Hello,\n\n world 123 ");
        let mut added: Vec<_> = self
            .tokenizer
            .get_added_tokens_decoder()
            .into_iter()
            .collect();
        added.sort_by_key(|(id, _)| *id);
        for (_, token) in &added {
            probe.push_str(&token.content);
            probe.push_str(" x\n\ty ");
            probe.push_str(&token.content);
            probe.push_str("\u{e9} 4");
        }
        probe
    }

    /// Whether cached and whole tokenization agree on a probe that holds every added token.
    fn cache_agrees(&self) -> bool {
        let Some(splitter) = &self.splitter else {
            return false;
        };
        let probe = self.probe_text();
        let probe_cache = SegmentCache::new(1 << 16);
        [false, true].into_iter().all(|add_special| {
            let affixes = match (add_special, &self.affixes) {
                (false, _) => None,
                (true, Some(affixes)) => Some(affixes),
                (true, None) => return true,
            };
            let cached = self.encode_pieces(splitter, &probe, affixes, &probe_cache);
            cached.ok() == self.encode_whole(&probe, add_special).ok()
        })
    }
}

/// The cut the tokenizer makes before normalizing, when Shepherd can make it too.
fn splitter(tokenizer: &Tokenizer) -> Option<Splitter> {
    let skip_special = tokenizer.get_encode_special_tokens();
    let mut patterns = Vec::new();
    let mut ids = Vec::new();
    for (id, token) in tokenizer.get_added_tokens_decoder() {
        if token.normalized || (skip_special && token.special) {
            continue;
        }
        if token.lstrip || token.rstrip || token.single_word || token.content.is_empty() {
            return None;
        }
        patterns.push(token.content);
        ids.push(id);
    }
    let automaton = AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostLongest)
        .build(&patterns)
        .ok()?;
    Some(Splitter { automaton, ids })
}
