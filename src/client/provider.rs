//! `Provider`: the model providers whose tool formats the client produces.

/// The model providers whose tool formats the client produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    /// OpenAI's Chat Completions (and every compatible server).
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
    /// Google's Gemini API.
    Gemini,
}

impl Provider {
    /// `openai`, `anthropic` or `gemini`.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
        }
    }
}
