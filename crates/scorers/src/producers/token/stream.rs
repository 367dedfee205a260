//! Tokenizing a text only as far as a caller needs: the first ids now, the rest later.
//!
//! The precise prefix producer needs a prompt's first block (16 tokens) to learn whether any
//! server holds it; most prompts never seen miss there, and the rest of the prompt changes no
//! score. [`PartialTokens`] holds the ids of a text's beginning and where they end; asked for
//! more, it tokenizes on from there, and [`PartialTokens::is_complete`] says when the whole
//! text is done. The ids are always those whole-text tokenization gives.
//!
//! How. The text is cut at its added tokens (as the segment cache cuts it, `hf.rs`): the
//! tokenizer never merges across one, and a piece already in the cache costs a lookup. A
//! piece not in the cache is tokenized a chunk at a time: the chunk (a few blocks' worth of
//! bytes, doubling each time it is not enough) is normalized and pre-tokenized, its words but
//! the last [`MARGIN_WORDS`] are kept (a word at the chunk's end may grow or split once more
//! text follows; one word further back may change with it, as `'` + `r` becomes `'re`), each
//! kept word is tokenized by the model alone, and the next chunk starts at the first word not
//! kept. Only tokenizers whose pipeline allows it are cut so (`prefix_stable.rs`; checked
//! again on a probe when the tokenizer loads); the others are tokenized whole. A piece
//! tokenized to its end is put in the segment cache, as whole tokenization would.

use std::sync::Arc;

use tokenizers::{
    Model, NormalizedString, Normalizer, OffsetReferential, OffsetType, PreTokenizedString,
    PreTokenizer,
};

use super::error::TokenizeError;
use super::hf::{HfTokenizer, Splitter};
use super::prefix_stable::CutRule;

/// Words at the end of a chunk that are not kept (tokenized again with the next chunk).
pub const MARGIN_WORDS: usize = 3;

/// Bytes of text tokenized for each token still wanted.
const BYTES_PER_WANTED_TOKEN: usize = 4;

/// Bytes added to each chunk for the words it will not keep.
const CHUNK_MARGIN_BYTES: usize = 32;

/// Bytes of a piece the segment cache's first check reads (its head key's).
const CACHE_HEAD_BYTES: usize = super::cache::HEAD_BYTES;

/// The ids of a text's beginning, and where tokenizing stopped (see the module docs).
///
/// Made by [`TokenProducer::begin`](super::TokenProducer::begin), continued by
/// [`TokenProducer::extend`](super::TokenProducer::extend) and
/// [`TokenProducer::finish`](super::TokenProducer::finish) with the same request.
///
/// ```
/// use std::borrow::Cow;
/// use std::path::Path;
/// use shepherd_scheduler_core::request::{ParseLimits, Prompt, parse_openai_request};
/// use shepherd_scorers::producers::token::{
///     BegunPrompt, TokenProducer, TokenProducerParameters, TokenizerFiles,
/// };
///
/// let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizer");
/// let files = TokenizerFiles::at(&dir).unwrap();
/// let tokens = TokenProducer::load("t", &files, &TokenProducerParameters::default()).unwrap();
/// let text = "The first block is all a pick needs when no server holds it. ".repeat(100);
/// let body = serde_json::json!({"model": "m", "prompt": text}).to_string();
/// let request = parse_openai_request("/v1/completions", body.as_bytes(), &ParseLimits::default())?;
///
/// let BegunPrompt::Partial(mut partial) = tokens.begin(&request).unwrap() else {
///     panic!("the fixture is tokenized a piece at a time");
/// };
/// tokens.extend(&request, &mut partial, 16).unwrap();
/// assert!(partial.ids().len() >= 16 && partial.bytes_done() < 200);
/// let Cow::Owned(Prompt::Tokens(whole)) = tokens.prompt_for(&request).unwrap() else {
///     panic!("token ids");
/// };
/// assert_eq!(partial.ids(), &whole[..partial.ids().len()]);
/// assert_eq!(tokens.finish(&request, partial).unwrap(), whole);
/// # Ok::<(), shepherd_scheduler_core::request::ParseError>(())
/// ```
#[derive(Debug, Clone)]
pub struct PartialTokens {
    /// The text when it is not the request's own (a rendered chat, or a copy kept to finish
    /// after the request is gone).
    text: Option<String>,
    add_special_tokens: bool,
    ids: Vec<u32>,
    /// Bytes of the text whose ids are in `ids`.
    at: usize,
    /// Where the current piece starts, and `ids.len()` there.
    piece_start: usize,
    piece_ids: usize,
    /// The added token that ends the current piece (start, end, id), once found.
    next_added: Option<(usize, usize, u32)>,
    /// Without `next_added`: no added token starts between the piece's start and here.
    clear_to: usize,
    /// Whether the cache was asked for the current piece.
    looked_up: bool,
    /// Bytes of the next chunk.
    chunk: usize,
    done: bool,
}

impl PartialTokens {
    /// The ids known so far, from the text's first.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// Whether the whole text is tokenized.
    pub fn is_complete(&self) -> bool {
        self.done
    }

    /// Bytes of the text tokenized so far.
    pub fn bytes_done(&self) -> usize {
        self.at
    }

    /// The ids, once complete (`None` before).
    pub fn into_ids(self) -> Option<Vec<u32>> {
        self.done.then_some(self.ids)
    }

    /// Keeps its own copy of the text (to be finished after the request is gone); returns its
    /// size in bytes.
    pub(super) fn keep_text(&mut self, request_text: &str) -> usize {
        let text = self.text.get_or_insert_with(|| request_text.to_owned());
        text.len()
    }

    /// Keeps `text` as the text these ids are of.
    pub(super) fn set_text(&mut self, text: String) {
        self.text = Some(text);
    }

    /// Takes the kept text out.
    pub(super) fn take_text(&mut self) -> Option<String> {
        self.text.take()
    }

    /// Whether the text is kept here.
    pub(super) fn has_text(&self) -> bool {
        self.text.is_some()
    }
}

impl HfTokenizer {
    /// Starts a partial tokenization (of a text given to [`HfTokenizer::extend`]), or `None`
    /// when this tokenizer is tokenized whole only.
    pub(super) fn begin(&self, add_special_tokens: bool) -> Option<PartialTokens> {
        self.cuts?;
        self.splitter.as_ref()?;
        let mut ids = Vec::new();
        if add_special_tokens {
            ids.extend_from_slice(&self.affixes.as_ref()?.0);
        }
        Some(PartialTokens {
            text: None,
            add_special_tokens,
            piece_ids: ids.len(),
            ids,
            at: 0,
            piece_start: 0,
            next_added: None,
            clear_to: 0,
            looked_up: false,
            chunk: 0,
            done: false,
        })
    }

    /// Tokenizes on until `partial` holds at least `want` ids, or the whole `text`.
    pub(super) fn extend(
        &self,
        partial: &mut PartialTokens,
        text: &str,
        want: usize,
    ) -> Result<(), TokenizeError> {
        let (Some(rule), Some(splitter)) = (self.cuts, self.splitter.as_ref()) else {
            return Err(TokenizeError::Unsupported(
                "this tokenizer is tokenized whole",
            ));
        };
        while !partial.done && partial.ids.len() < want {
            let wanted = want.saturating_sub(partial.ids.len());
            let chunk = partial.chunk.max(
                wanted
                    .saturating_mul(BYTES_PER_WANTED_TOKEN)
                    .saturating_add(CHUNK_MARGIN_BYTES),
            );
            let horizon = partial.at.saturating_add(chunk.max(CACHE_HEAD_BYTES));
            let known_end = piece_end_before(splitter, partial, text, horizon);
            if let Some(piece_end) = known_end
                && partial.at >= piece_end
            {
                self.next_piece(partial, text, piece_end);
                continue;
            }
            if !partial.looked_up {
                partial.looked_up = true;
                if self.cache.enabled() && self.take_cached(splitter, partial, text, known_end) {
                    continue;
                }
            }
            match known_end {
                Some(piece_end) if piece_end - partial.at <= chunk => {
                    let ids = self.encode_whole(&text[partial.at..piece_end], false)?;
                    partial.ids.extend_from_slice(&ids);
                    partial.at = piece_end;
                }
                _ => {
                    // No added token starts before the horizon, so none in the chunk.
                    let mut end = partial.at + chunk;
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    let cut = self.stable_words(&text[partial.at..end], rule, &mut partial.ids)?;
                    if cut == 0 {
                        partial.chunk = chunk.saturating_mul(2);
                    }
                    partial.at += cut;
                }
            }
        }
        Ok(())
    }

    /// The current piece ended at `piece_end`: keeps it in the cache, then steps over the
    /// added token that ended it (or ends the text).
    fn next_piece(&self, partial: &mut PartialTokens, text: &str, piece_end: usize) {
        self.end_piece(partial, text, piece_end);
        match partial.next_added.take() {
            Some((_, end, id)) => {
                partial.ids.push(id);
                partial.at = end;
                partial.piece_start = end;
                partial.piece_ids = partial.ids.len();
                partial.clear_to = end;
                partial.looked_up = false;
            }
            None => {
                if partial.add_special_tokens
                    && let Some((_, suffix)) = &self.affixes
                {
                    partial.ids.extend_from_slice(suffix);
                }
                partial.done = true;
            }
        }
    }

    /// Takes the current piece's ids from the cache when it holds them (the piece starts at
    /// `partial.at`; `known_end` is its end when known). Finds the piece's end only when the
    /// cache may hold a piece that starts so.
    fn take_cached(
        &self,
        splitter: &Splitter,
        partial: &mut PartialTokens,
        text: &str,
        known_end: Option<usize>,
    ) -> bool {
        let start_end = known_end.map_or(partial.at + CACHE_HEAD_BYTES, |end| {
            end.min(partial.at + CACHE_HEAD_BYTES)
        });
        let Some(start) = text.as_bytes().get(partial.at..start_end) else {
            return false;
        };
        if !self.cache.may_hold(start) {
            self.cache.count_miss();
            return false;
        }
        let piece_end = piece_end_before(splitter, partial, text, usize::MAX).unwrap_or(text.len());
        let Some(ids) = text
            .get(partial.at..piece_end)
            .and_then(|piece| self.cache.get(piece))
        else {
            return false;
        };
        partial.ids.extend_from_slice(&ids);
        partial.at = piece_end;
        // Already cached: nothing to keep when the piece ends.
        partial.piece_start = usize::MAX;
        true
    }

    /// Puts the ids of the piece that just ended in the cache, when it was tokenized here
    /// from its start.
    fn end_piece(&self, partial: &mut PartialTokens, text: &str, piece_end: usize) {
        if partial.piece_start > piece_end || !self.cache.enabled() {
            return;
        }
        if let (Some(piece), Some(ids)) = (
            text.get(partial.piece_start..piece_end),
            partial.ids.get(partial.piece_ids..),
        ) && !piece.is_empty()
        {
            self.cache.insert(piece, Arc::from(ids));
        }
    }

    /// Appends to `ids` the ids of the words of `chunk` (the start of a piece's rest) but the
    /// last [`MARGIN_WORDS`]; returns the bytes they cover (0: none could be kept).
    fn stable_words(
        &self,
        chunk: &str,
        rule: CutRule,
        ids: &mut Vec<u32>,
    ) -> Result<usize, TokenizeError> {
        let encode = |e: tokenizers::Error| TokenizeError::Encode(e.to_string());
        let mut normalized = NormalizedString::from(chunk);
        if let Some(normalizer) = self.tokenizer.get_normalizer() {
            normalizer.normalize(&mut normalized).map_err(encode)?;
        }
        let mut words = PreTokenizedString::from(normalized);
        if let Some(pre_tokenizer) = self.tokenizer.get_pre_tokenizer() {
            pre_tokenizer.pre_tokenize(&mut words).map_err(encode)?;
        }
        let splits = words.get_splits(OffsetReferential::Original, OffsetType::Byte);
        let mut keep = splits.len().saturating_sub(MARGIN_WORDS);
        if rule == CutRule::BeforeAscii {
            while keep > 0
                && !splits
                    .get(keep)
                    .and_then(|split| chunk.as_bytes().get(split.1.0))
                    .is_some_and(u8::is_ascii)
            {
                keep -= 1;
            }
        }
        let cut = splits.get(keep).map_or(0, |split| split.1.0);
        if keep == 0 || cut == 0 {
            return Ok(0);
        }
        let model = self.tokenizer.get_model();
        for (word, _, _) in &splits[..keep] {
            ids.extend(model.tokenize(word).map_err(encode)?.iter().map(|t| t.id));
        }
        Ok(cut)
    }

    /// Whether tokenizing the probe text a few bytes at a time gives its whole ids.
    pub(super) fn stream_agrees(&self) -> bool {
        let probe = self.probe_text().repeat(3);
        [false, true].into_iter().all(|add_special| {
            let Ok(whole) = self.encode_whole(&probe, add_special) else {
                return false;
            };
            let Some(mut partial) = self.begin(add_special) else {
                return add_special && self.affixes.is_none();
            };
            let mut want = 1;
            while !partial.done {
                partial.chunk = 8;
                if self.extend(&mut partial, &probe, want).is_err() {
                    return false;
                }
                want += 3;
            }
            partial.ids == whole
        })
    }
}

/// The end of the current piece when it lies before `upto`: the start of the next added
/// token, or the text's end. `None`: no added token starts before `upto` and the text goes
/// on. Searches only as far as `upto` (and an added token's length) past what is known.
fn piece_end_before(
    splitter: &Splitter,
    partial: &mut PartialTokens,
    text: &str,
    upto: usize,
) -> Option<usize> {
    if let Some((start, ..)) = partial.next_added {
        return Some(start);
    }
    let upto = upto.min(text.len());
    if partial.clear_to < upto {
        let from = partial.clear_to;
        // A match starting before `upto` ends within the window: the window finds it whole.
        let window_end = upto
            .saturating_add(splitter.automaton.max_pattern_len())
            .min(text.len());
        let found = text
            .as_bytes()
            .get(from..window_end)
            .and_then(|window| splitter.automaton.find(window))
            .filter(|found| from + found.start() < upto);
        match found.and_then(|f| Some((f, *splitter.ids.get(f.pattern().as_usize())?))) {
            Some((found, id)) => {
                partial.next_added = Some((from + found.start(), from + found.end(), id));
                return Some(from + found.start());
            }
            None => partial.clear_to = upto,
        }
    }
    (partial.clear_to >= text.len()).then_some(text.len())
}
