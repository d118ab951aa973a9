//! `--chat`: the model's chat template from `tokenizer_config.json`, rendered with minijinja
//! the way `transformers` renders it (trim_blocks and lstrip_blocks on, Python string methods).

use std::path::{Path, PathBuf};

use gattn_tensor::input_file::read_regular_to_string;
use gattn_tensor::strict_json::parse_strict;
use minijinja::{Environment, Error, ErrorKind, context};
use serde_json::Value;

use crate::run::error::RunError;

/// tokenizer_config.json is some KB (Qwen3's: 10 KB with its template).
const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// Template instructions one render may run: Qwen3's template over a long conversation needs
/// some thousands; ten million is a runaway loop (stopped in about a second).
const TEMPLATE_FUEL: u64 = 10_000_000;

/// The chat template of a checkpoint. RULER puts the whole task text in one user turn, opens
/// the assistant turn, and appends the answer prefix after the assistant header.
#[derive(Debug, Clone)]
pub struct ChatTemplate {
    source: String,
    bos_token: String,
    eos_token: String,
    path: PathBuf,
}

/// One turn of a conversation: `role` (system, user, assistant) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

/// `bos_token` / `eos_token` are either strings or `{"content": "..."}` objects.
fn special_token(config: &Value, key: &str) -> String {
    match &config[key] {
        Value::String(s) => s.clone(),
        Value::Object(o) => o
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    }
}

impl ChatTemplate {
    /// Reads `dir/tokenizer_config.json`. A list of named templates picks `default`.
    pub fn from_dir(dir: &Path) -> Result<ChatTemplate, RunError> {
        let path = dir.join("tokenizer_config.json");
        let fail = |reason: String| RunError::ChatTemplate {
            path: path.clone(),
            reason,
        };
        let text = read_regular_to_string(&path, MAX_CONFIG_BYTES)
            .map_err(|e| fail(format!("cannot read it ({e}); --chat needs it")))?;
        let config: Value =
            parse_strict(&text).map_err(|e| fail(format!("not valid JSON: {e}")))?;
        let source = match &config["chat_template"] {
            Value::String(s) => s.clone(),
            Value::Array(named) => named
                .iter()
                .find(|t| t["name"] == "default")
                .and_then(|t| t["template"].as_str())
                .ok_or_else(|| fail("no template named `default` in the list".into()))?
                .to_string(),
            _ => {
                return Err(fail(
                    "no `chat_template` field: run without --chat (raw template)".into(),
                ));
            }
        };
        let template = ChatTemplate {
            source,
            bos_token: special_token(&config, "bos_token"),
            eos_token: special_token(&config, "eos_token"),
            path,
        };
        template.render_user_turn("")?; // report a broken template before any work
        Ok(template)
    }

    /// Builds a template from its source (tests, and callers with their own config).
    pub fn from_source(source: &str, bos_token: &str, eos_token: &str) -> ChatTemplate {
        ChatTemplate {
            source: source.to_string(),
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
            path: PathBuf::from("<chat template>"),
        }
    }

    /// The token that ends a turn (`eos_token` of tokenizer_config.json), possibly empty.
    pub fn eos_token(&self) -> &str {
        &self.eos_token
    }

    /// One user turn holding `content`, then the assistant header (`add_generation_prompt`).
    /// `enable_thinking` is false so that thinking models answer directly, as RULER expects.
    pub fn render_user_turn(&self, content: &str) -> Result<String, RunError> {
        self.render(&[ChatMessage {
            role: "user".into(),
            content: content.into(),
        }])
    }

    /// A conversation (`gattn-cpu serve`'s chat endpoint), then the assistant header, with
    /// thinking off as in [`render_user_turn`](Self::render_user_turn).
    pub fn render(&self, messages: &[ChatMessage]) -> Result<String, RunError> {
        let mut env = Environment::new();
        // A template is a program: one that loops without end (or for 10^10 steps) is stopped
        // with an error instead of hanging the run or the server.
        env.set_fuel(Some(TEMPLATE_FUEL));
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |message: String| -> Result<String, Error> {
                Err(Error::new(ErrorKind::InvalidOperation, message))
            },
        );
        let fail = |e: Error| RunError::ChatTemplate {
            path: self.path.clone(),
            reason: if e.kind() == ErrorKind::OutOfFuel {
                format!("rendering takes more than {TEMPLATE_FUEL} steps (a runaway loop?): {e:#}")
            } else {
                format!("{e:#}")
            },
        };
        let template = env.template_from_str(&self.source).map_err(fail)?;
        let messages: Vec<_> = messages
            .iter()
            .map(|m| context! { role => &m.role, content => &m.content })
            .collect();
        template
            .render(context! {
                messages => messages,
                add_generation_prompt => true,
                enable_thinking => false,
                bos_token => &self.bos_token,
                eos_token => &self.eos_token,
            })
            .map_err(fail)
    }

    /// The prompt RULER sends with a chat template: the rendered user turn plus the answer
    /// prefix after the assistant header.
    pub fn prompt(&self, input: &str, answer_prefix: &str) -> Result<String, RunError> {
        Ok(self.render_user_turn(input)? + answer_prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHATML: &str = "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

    #[test]
    fn chatml_wraps_the_input_and_appends_the_answer_prefix() {
        let t = ChatTemplate::from_source(CHATML, "", "<|im_end|>");
        let p = t.prompt("Find the needle.", " Answer:").unwrap();
        assert_eq!(
            p,
            "<|im_start|>user\nFind the needle.<|im_end|>\n<|im_start|>assistant\n Answer:"
        );
    }

    #[test]
    fn python_string_methods_and_raise_exception_work() {
        let t = ChatTemplate::from_source(
            "{% if messages[0]['role'] != 'user' %}{{ raise_exception('user first') }}{% endif %}{{ messages[0]['content'].strip().upper() }}",
            "",
            "",
        );
        assert_eq!(t.render_user_turn("  hi ").unwrap(), "HI");
        let bad = ChatTemplate::from_source("{{ raise_exception('no') }}", "", "");
        let err = bad.render_user_turn("x").unwrap_err().to_string();
        assert!(err.contains("no"), "{err}");
    }

    #[test]
    fn a_conversation_renders_every_turn_in_order() {
        let t = ChatTemplate::from_source(CHATML, "", "<|im_end|>");
        let turn = |role: &str, content: &str| ChatMessage {
            role: role.into(),
            content: content.into(),
        };
        let p = t
            .render(&[turn("system", "Be brief."), turn("user", "Hi")])
            .unwrap();
        assert_eq!(
            p,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }
}
