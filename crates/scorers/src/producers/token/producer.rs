//! [`TokenProducer`]: the request's prompt as the model server's token ids.

use std::borrow::Cow;
use std::sync::Arc;

use shepherd_scheduler_core::request::{ApiKind, ChatMessages, InferenceRequest, Prompt};

use super::cache::CacheStats;
use super::error::{TokenizeError, TokenizerLoadError};
use super::files::TokenizerFiles;
use super::finish::{FinishStats, Finisher};
use super::hf::HfTokenizer;
use super::parameters::TokenProducerParameters;
use super::render::RenderBackend;
use super::stream::PartialTokens;
use super::template::ChatTemplate;
use super::{BYTES_PER_TOKEN, TokenCount};

#[derive(Debug)]
enum Backend {
    Estimate,
    Tokenizer(Box<HfTokenizer>),
    Render(Box<RenderBackend>),
}

/// A `token-producer`: turns a request into the token ids its model server will see (with a
/// real tokenizer), or leaves its prompt as it is (the estimate backend).
///
/// Kept in the shared resources under the plugin's name; consumers find it with
/// `resources.get::<TokenProducer>(name)` or `resources.all::<TokenProducer>()` and call
/// [`TokenProducer::prompt_for`] once per request. Thread-safe; tokenization runs on the
/// caller's thread, with a bounded cache of text already seen (see the module docs).
#[derive(Debug)]
pub struct TokenProducer {
    name: String,
    backend: Backend,
    finisher: Finisher,
}

/// A request's prompt as far as [`TokenProducer::begin`] tokenized it.
#[derive(Debug)]
pub enum BegunPrompt<'r> {
    /// The whole prompt (what [`TokenProducer::prompt_for`] gives).
    Whole(Cow<'r, Prompt>),
    /// The ids of its beginning; [`TokenProducer::extend`] and [`TokenProducer::finish`] go on.
    Partial(PartialTokens),
}

impl TokenProducer {
    /// The estimate backend: prompts are left as they are (text is cut into pseudo tokens of
    /// [`BYTES_PER_TOKEN`] bytes by whoever hashes it).
    pub fn estimate(name: impl Into<String>) -> Self {
        TokenProducer {
            name: name.into(),
            backend: Backend::Estimate,
            finisher: Finisher::default(),
        }
    }

    /// A real tokenizer from `files`, with the chat template format and cache size of
    /// `parameters` (its backend fields are not read).
    pub fn load(
        name: impl Into<String>,
        files: &TokenizerFiles,
        parameters: &TokenProducerParameters,
    ) -> Result<Self, TokenizerLoadError> {
        let config = files.read_config()?;
        let template = match config.template {
            Some((source, origin)) => Some(ChatTemplate::new(
                source,
                origin,
                config.special_tokens,
                parameters.chat_template_content_format,
            )?),
            None => None,
        };
        let tokenizer = HfTokenizer::load(&files.tokenizer, template, parameters.cache_max_tokens)?;
        Ok(TokenProducer {
            name: name.into(),
            backend: Backend::Tokenizer(Box::new(tokenizer)),
            finisher: Finisher::default(),
        })
    }

    /// The `vllm` backend: the model server renders prompts before the pick (see
    /// [`RenderBackend`]).
    pub fn render(name: impl Into<String>, render: RenderBackend) -> Self {
        TokenProducer {
            name: name.into(),
            backend: Backend::Render(Box::new(render)),
            finisher: Finisher::default(),
        }
    }

    /// The render backend, when this producer has one (the adapters call it before a pick).
    pub fn render_backend(&self) -> Option<&RenderBackend> {
        match &self.backend {
            Backend::Render(render) => Some(render),
            _ => None,
        }
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether [`TokenProducer::prompt_for`] gives the server's real token ids (a real
    /// tokenizer), rather than the prompt as it came (the estimate backend).
    pub fn is_exact(&self) -> bool {
        matches!(self.backend, Backend::Tokenizer(_) | Backend::Render(_))
    }

    /// Whether a chat template is loaded.
    pub fn has_chat_template(&self) -> bool {
        self.tokenizer()
            .is_some_and(|tokenizer| tokenizer.template().is_some())
    }

    /// Whether the segment cache is in use (a real tokenizer, a budget above 0, and a
    /// tokenizer for which it is exact).
    pub fn is_caching(&self) -> bool {
        self.tokenizer().is_some_and(HfTokenizer::caching)
    }

    /// The segment cache's counts (`None` for the estimate backend).
    pub fn cache_stats(&self) -> Option<CacheStats> {
        self.tokenizer().map(HfTokenizer::cache_stats)
    }

    fn tokenizer(&self) -> Option<&HfTokenizer> {
        match &self.backend {
            Backend::Tokenizer(tokenizer) => Some(tokenizer),
            Backend::Estimate | Backend::Render(_) => None,
        }
    }

    fn require_tokenizer(&self) -> Result<&HfTokenizer, TokenizeError> {
        self.tokenizer().ok_or(TokenizeError::Unsupported(
            "the estimate backend has no tokenizer",
        ))
    }

    /// The prompt of `request` as its model server will tokenize it.
    ///
    /// - Token ids the request carries ([`Prompt::Tokens`]) come back as they are, borrowed.
    /// - The estimate backend gives the request's own prompt, borrowed.
    /// - A real tokenizer gives [`Prompt::Tokens`]: for chat completions, the chat template's
    ///   rendering of [`InferenceRequest::chat`] encoded without added special tokens; for
    ///   completions (and embeddings, and other text prompts), the text encoded with them.
    ///
    /// Errors ([`TokenizeError`]) say why the server's ids cannot be had; the caller falls
    /// back to whatever it does without them.
    pub fn prompt_for<'r>(
        &self,
        request: &'r InferenceRequest,
    ) -> Result<Cow<'r, Prompt>, TokenizeError> {
        let (tokenizer, text) = match (&self.backend, &request.prompt) {
            (Backend::Estimate, _) | (_, Prompt::Tokens(_)) => {
                return Ok(Cow::Borrowed(&request.prompt));
            }
            (Backend::Render(render), Prompt::Text(_)) => {
                return match render.get(&request.id) {
                    Some(ids) => Ok(Cow::Owned(Prompt::Tokens(ids.to_vec()))),
                    None => Err(TokenizeError::NotRendered),
                };
            }
            (Backend::Tokenizer(tokenizer), Prompt::Text(text)) => (tokenizer, text),
        };
        let ids = match request.api {
            ApiKind::ChatCompletions => {
                let chat = request
                    .chat
                    .as_deref()
                    .ok_or(TokenizeError::MissingMessages)?;
                supported(chat)?;
                tokenizer.encode_chat(chat)?
            }
            ApiKind::Responses => {
                return Err(TokenizeError::Unsupported("the responses API"));
            }
            ApiKind::Messages => {
                return Err(TokenizeError::Unsupported("the Anthropic messages API"));
            }
            ApiKind::Completions
            | ApiKind::Embeddings
            | ApiKind::VllmGenerate
            | ApiKind::SglangGenerate
            | ApiKind::Unparsed => tokenizer.encode(text, true)?,
        };
        Ok(Cow::Owned(Prompt::Tokens(ids)))
    }

    /// Starts tokenizing `request`'s prompt, tokenizing nothing yet when it can be done a
    /// piece at a time (a real tokenizer whose configuration allows it, `stream.rs`): then
    /// [`TokenProducer::extend`] gives the ids as far as asked, and the ids are always those
    /// of [`TokenProducer::prompt_for`]. Otherwise (token ids given, the estimate and render
    /// backends, a tokenizer that is tokenized whole) the whole prompt, as `prompt_for`.
    pub fn begin<'r>(
        &self,
        request: &'r InferenceRequest,
    ) -> Result<BegunPrompt<'r>, TokenizeError> {
        let (Backend::Tokenizer(tokenizer), Prompt::Text(_)) = (&self.backend, &request.prompt)
        else {
            return self.prompt_for(request).map(BegunPrompt::Whole);
        };
        let begun = match request.api {
            ApiKind::ChatCompletions => {
                let chat = request
                    .chat
                    .as_deref()
                    .ok_or(TokenizeError::MissingMessages)?;
                supported(chat)?;
                let template = tokenizer.template().ok_or(TokenizeError::NoChatTemplate)?;
                let rendered = template.render(chat)?;
                tokenizer.begin(false).map(|mut partial| {
                    partial.set_text(rendered);
                    partial
                })
            }
            ApiKind::Completions
            | ApiKind::Embeddings
            | ApiKind::VllmGenerate
            | ApiKind::SglangGenerate
            | ApiKind::Unparsed => tokenizer.begin(true),
            ApiKind::Responses | ApiKind::Messages => None,
        };
        match begun {
            Some(partial) => Ok(BegunPrompt::Partial(partial)),
            None => self.prompt_for(request).map(BegunPrompt::Whole),
        }
    }

    /// Tokenizes `request`'s prompt on until `partial` (from [`TokenProducer::begin`] on the
    /// same request) holds at least `want` ids, or all of them.
    pub fn extend(
        &self,
        request: &InferenceRequest,
        partial: &mut PartialTokens,
        want: usize,
    ) -> Result<(), TokenizeError> {
        let tokenizer = self.require_tokenizer()?;
        match (partial.take_text(), &request.prompt) {
            (Some(kept), _) => {
                let done = tokenizer.extend(partial, &kept, want);
                partial.set_text(kept);
                done
            }
            (None, Prompt::Text(text)) => tokenizer.extend(partial, text, want),
            (None, Prompt::Tokens(_)) => Err(TokenizeError::Unsupported("a prompt of token ids")),
        }
    }

    /// The whole prompt's ids: `partial` tokenized to its end.
    pub fn finish(
        &self,
        request: &InferenceRequest,
        mut partial: PartialTokens,
    ) -> Result<Vec<u32>, TokenizeError> {
        self.extend(request, &mut partial, usize::MAX)?;
        partial
            .into_ids()
            .ok_or(TokenizeError::Encode("the tokenization did not end".into()))
    }

    /// Finishes `partial` on this producer's background thread, then calls `then` with the
    /// whole prompt's ids there (the segment cache learns the prompt on the way). The text is
    /// copied first unless `partial` keeps its own. `false` when the queue was full and the
    /// job dropped (counted in [`TokenProducer::finish_stats`]).
    pub fn finish_later(
        self: &Arc<Self>,
        request: &InferenceRequest,
        mut partial: PartialTokens,
        then: impl FnOnce(Vec<u32>) + Send + 'static,
    ) -> bool {
        if self.tokenizer().is_none() {
            return false;
        }
        let bytes = match &request.prompt {
            Prompt::Text(text) => partial.keep_text(text),
            Prompt::Tokens(_) if partial.has_text() => partial.keep_text(""),
            Prompt::Tokens(_) => return false,
        };
        let producer = Arc::clone(self);
        self.finisher.submit(bytes, move || {
            let Some(tokenizer) = producer.tokenizer() else {
                return;
            };
            let text = partial.take_text().unwrap_or_default();
            if tokenizer.extend(&mut partial, &text, usize::MAX).is_ok()
                && let Some(ids) = partial.into_ids()
            {
                then(ids);
            }
        })
    }

    /// What the background thread of [`TokenProducer::finish_later`] did.
    pub fn finish_stats(&self) -> FinishStats {
        self.finisher.stats()
    }

    /// Waits until every tokenization handed to [`TokenProducer::finish_later`] has run.
    pub fn wait_finished(&self) {
        self.finisher.wait_idle();
    }

    /// The prompt length of `request` in tokens: exact when [`TokenProducer::prompt_for`]
    /// gives token ids, else one token per [`BYTES_PER_TOKEN`] bytes of text.
    pub fn count(&self, request: &InferenceRequest) -> TokenCount {
        match self.prompt_for(request) {
            Ok(prompt) => TokenCount::of_prompt(&prompt),
            Err(_) => TokenCount {
                tokens: request.prompt.len_bytes() / BYTES_PER_TOKEN,
                exact: false,
            },
        }
    }

    /// The chat template's text for `chat`, before tokenization.
    pub fn render_chat(&self, chat: &ChatMessages) -> Result<String, TokenizeError> {
        let template = self
            .require_tokenizer()?
            .template()
            .ok_or(TokenizeError::NoChatTemplate)?;
        template.render(chat)
    }

    /// The ids of `text`, with the tokenizer's special tokens around it when
    /// `add_special_tokens` (through the cache when it is in use).
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, TokenizeError> {
        self.require_tokenizer()?.encode(text, add_special_tokens)
    }
}

/// Refuses what the rendering does not reproduce.
fn supported(chat: &ChatMessages) -> Result<(), TokenizeError> {
    if chat.has_tools {
        return Err(TokenizeError::Unsupported("tool definitions (`tools`)"));
    }
    if chat.messages.iter().any(|m| m.has_media) {
        return Err(TokenizeError::Unsupported(
            "content parts other than text (images, audio, video, files)",
        ));
    }
    Ok(())
}
