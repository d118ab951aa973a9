//! `config.json` (and `generation_config.json`) of a Hugging Face Qwen3 checkpoint, validated.
//!
//! Fields are read one by one from the JSON object so that every error names the file, the field
//! and the value found. Unknown keys are ignored, as transformers does.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use gattn_tensor::input_file::read_regular_to_string;
use gattn_tensor::strict_json::parse_strict_object;

use crate::error::{ModelError, Result};

/// Which of the paper's output gates the checkpoint has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateMode {
    /// Baseline Qwen3: no gate.
    None,
    /// One sigmoid gate scalar per head.
    Headwise,
    /// One sigmoid gate value per head dimension.
    Elementwise,
}

impl GateMode {
    pub fn name(self) -> &'static str {
        match self {
            GateMode::None => "none",
            GateMode::Headwise => "headwise",
            GateMode::Elementwise => "elementwise",
        }
    }

    pub fn parse(s: &str) -> Option<GateMode> {
        match s {
            "none" | "baseline" => Some(GateMode::None),
            "headwise" => Some(GateMode::Headwise),
            "elementwise" => Some(GateMode::Elementwise),
            _ => None,
        }
    }

    /// Gate scores each query head gets from q_proj: 0, 1 or head_dim.
    pub fn scores_per_head(self, head_dim: usize) -> usize {
        match self {
            GateMode::None => 0,
            GateMode::Headwise => 1,
            GateMode::Elementwise => head_dim,
        }
    }
}

/// RoPE frequency scaling, as `transformers` computes it.
#[derive(Debug, Clone, PartialEq)]
pub enum RopeScaling {
    None,
    /// Position interpolation: every inverse frequency divided by `factor`.
    Linear {
        factor: f64,
    },
    /// YaRN (arXiv 2309.00071) with transformers' defaults filled in.
    Yarn(YarnParams),
}

#[derive(Debug, Clone, PartialEq)]
pub struct YarnParams {
    pub factor: f64,
    pub original_max_position_embeddings: usize,
    /// Multiplies cos and sin; `None` = transformers' default (0.1 ln(factor) + 1, or the mscale ratio).
    pub attention_factor: Option<f64>,
    pub beta_fast: f64,
    pub beta_slow: f64,
    pub mscale: Option<f64>,
    pub mscale_all_dim: Option<f64>,
    pub truncate: bool,
}

impl YarnParams {
    /// The ranges in which YaRN's formulas mean something: the betas are rotation counts
    /// (`beta_fast` > `beta_slow` > 0, else the ramp runs backwards or takes a log of <= 0), and
    /// the scales are positive. On failure: the field and why.
    pub fn check(&self) -> std::result::Result<(), (&'static str, String)> {
        let positive = |field: &'static str, value: f64| {
            if value.is_finite() && value > 0.0 {
                Ok(())
            } else {
                Err((field, format!("is {value}, expected a finite number > 0")))
            }
        };
        positive("beta_fast", self.beta_fast)?;
        positive("beta_slow", self.beta_slow)?;
        if self.beta_fast <= self.beta_slow {
            return Err((
                "beta_fast",
                format!(
                    "is {}, expected more than beta_slow ({})",
                    self.beta_fast, self.beta_slow
                ),
            ));
        }
        if let Some(factor) = self.attention_factor {
            positive("attention_factor", factor)?;
        }
        // An mscale of 0 is legal (it turns the scale off); negative or NaN is not.
        for (field, value) in [
            ("mscale", self.mscale),
            ("mscale_all_dim", self.mscale_all_dim),
        ] {
            if let Some(value) = value.filter(|v| !(v.is_finite() && *v >= 0.0)) {
                return Err((field, format!("is {value}, expected a finite number >= 0")));
            }
        }
        Ok(())
    }
}

impl RopeScaling {
    /// `--rope-scaling` on the command line: `none`, `linear:FACTOR`, `yarn:FACTOR[:ORIGINAL]`
    /// (ORIGINAL defaults to the checkpoint's max_position_embeddings, as Qwen3's docs do for
    /// 131072 tokens: `yarn:4` over 32768).
    pub fn parse_cli(
        text: &str,
        max_position_embeddings: usize,
    ) -> std::result::Result<RopeScaling, String> {
        let parts: Vec<&str> = text.split(':').collect();
        let number = |s: &str| -> std::result::Result<f64, String> {
            match s.parse::<f64>() {
                Ok(f) if f.is_finite() && f >= 1.0 => Ok(f),
                _ => Err(format!(
                    "`{s}` in --rope-scaling {text} is not a factor >= 1"
                )),
            }
        };
        match parts.as_slice() {
            ["none"] => Ok(RopeScaling::None),
            ["linear", factor] => Ok(RopeScaling::Linear {
                factor: number(factor)?,
            }),
            ["yarn", factor, rest @ ..] if rest.len() <= 1 => {
                let original = match rest.first() {
                    None => max_position_embeddings,
                    Some(s) => s.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| {
                        format!("`{s}` in --rope-scaling {text} is not a token count")
                    })?,
                };
                Ok(RopeScaling::Yarn(YarnParams {
                    factor: number(factor)?,
                    original_max_position_embeddings: original,
                    attention_factor: None,
                    beta_fast: 32.0,
                    beta_slow: 1.0,
                    mscale: None,
                    mscale_all_dim: None,
                    truncate: true,
                }))
            }
            _ => Err(format!(
                "--rope-scaling {text}: expected none, linear:FACTOR or yarn:FACTOR[:ORIGINAL_MAX_POSITIONS]"
            )),
        }
    }
}

/// More parameters than any machine this engine runs on can hold (2^50, about 10^15): a config
/// beyond it is a corrupted or foreign file, refused before any size is derived from it.
pub const MAX_PARAMETERS: u64 = 1 << 50;

/// The validated model configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Qwen3Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f32,
    pub rope_theta: f64,
    pub rope_scaling: RopeScaling,
    pub max_position_embeddings: usize,
    pub tie_word_embeddings: bool,
    /// Bias on q, k, v and o_proj (`attention_bias`, or `qkv_bias` in some exports).
    pub attention_bias: bool,
    pub use_qk_norm: bool,
    pub gate: GateMode,
    pub bos_token_id: Option<u32>,
    pub eos_token_ids: Vec<u32>,
    /// `gattn_quantization` is present (written by `gattn-cpu quantize`): the linear weights are
    /// stored int8 in the layout [`gattn_kernels::matmul::Q8_FORMAT`] names.
    pub quantized_int8: bool,
}

/// The `gattn_quantization` object `gattn-cpu quantize` adds to config.json.
pub const QUANTIZATION_KEY: &str = "gattn_quantization";

impl Qwen3Config {
    /// Replaces the RoPE scaling; YaRN also extends `max_position_embeddings` to
    /// `factor x original`, as transformers does.
    pub fn set_rope_scaling(&mut self, scaling: RopeScaling) {
        if let RopeScaling::Yarn(y) = &scaling {
            self.max_position_embeddings =
                (y.factor * y.original_max_position_embeddings as f64) as usize;
        }
        self.rope_scaling = scaling;
    }

    /// Query heads that share one KV head.
    pub fn group_size(&self) -> usize {
        self.num_attention_heads / self.num_key_value_heads
    }

    /// Output rows of q_proj: queries plus the gate scores.
    pub fn q_proj_rows(&self) -> usize {
        self.num_attention_heads * (self.head_dim + self.gate.scores_per_head(self.head_dim))
    }

    pub fn kv_dim(&self) -> usize {
        self.num_key_value_heads * self.head_dim
    }

    pub fn q_dim(&self) -> usize {
        self.num_attention_heads * self.head_dim
    }

    /// Parameters, counting a tied embedding once (saturating at u64::MAX; configs read from
    /// JSON are refused beyond [`MAX_PARAMETERS`]).
    pub fn parameter_count(&self) -> u64 {
        u64::try_from(self.parameter_count_wide()).unwrap_or(u64::MAX)
    }

    /// In u128: with every size at its 2^31 limit the count is below 2^128, so nothing here
    /// can overflow (in u64 it did: `h * q_rows` alone reaches 2^94).
    fn parameter_count_wide(&self) -> u128 {
        let h = self.hidden_size as u128;
        let bias = self.attention_bias as u128;
        let q_rows = self.q_proj_rows() as u128;
        let kv = self.kv_dim() as u128;
        let q_dim = self.q_dim() as u128;
        let attention = h * q_rows + 2 * h * kv + q_dim * h + bias * (q_rows + 2 * kv + h);
        let qk_norm = if self.use_qk_norm {
            2 * self.head_dim as u128
        } else {
            0
        };
        let mlp = 3 * h * self.intermediate_size as u128;
        let per_layer = attention + qk_norm + mlp + 2 * h;
        let embed = self.vocab_size as u128 * h;
        let lm_head = if self.tie_word_embeddings { 0 } else { embed };
        embed + lm_head + h + per_layer * self.num_hidden_layers as u128
    }

    /// Reads `dir/config.json` and, if present, `dir/generation_config.json` (its eos/bos win).
    pub fn from_dir(dir: &Path) -> Result<Qwen3Config> {
        let config_path = dir.join("config.json");
        let mut config = Self::from_json_file(&config_path)?;
        let generation_path = dir.join("generation_config.json");
        if generation_path.exists() {
            let object = read_json_object(&generation_path)?;
            let fields = Fields::new(&generation_path, &object);
            if let Some(ids) = fields.token_ids("eos_token_id")? {
                fields.check_in_vocab("eos_token_id", &ids, config.vocab_size)?;
                config.eos_token_ids = ids;
            }
            if let Some(ids) = fields.token_ids("bos_token_id")? {
                fields.check_in_vocab("bos_token_id", &ids, config.vocab_size)?;
                config.bos_token_id = ids.first().copied();
            }
        }
        Ok(config)
    }

    pub fn from_json_file(path: &Path) -> Result<Qwen3Config> {
        let object = read_json_object(path)?;
        Self::from_json_object(path, &object)
    }

    pub fn from_json_str(path: &Path, text: &str) -> Result<Qwen3Config> {
        let object = parse_json_object(path, text)?;
        Self::from_json_object(path, &object)
    }

    fn from_json_object(path: &Path, object: &Map<String, Value>) -> Result<Qwen3Config> {
        let f = Fields::new(path, object);
        match f.string("model_type")? {
            Some("qwen3") => {}
            Some(other) => {
                return Err(f.error(
                    "model_type",
                    format!("is \"{other}\", expected \"qwen3\" (only Qwen3 models are supported)"),
                ));
            }
            None => return Err(f.error("model_type", "is missing (expected \"qwen3\")".into())),
        }
        if let Some(act) = f.string("hidden_act")?
            && act != "silu"
        {
            return Err(f.unsupported(format!("hidden_act \"{act}\" (Qwen3 uses \"silu\")")));
        }
        if f.bool("use_sliding_window")?.unwrap_or(false) {
            return Err(f.unsupported(
                "sliding-window attention (use_sliding_window is true); set it to false".into(),
            ));
        }
        if let Some(Value::Array(types)) = object.get("layer_types")
            && types
                .iter()
                .any(|t| t.as_str() == Some("sliding_attention"))
        {
            return Err(f.unsupported("sliding-window attention in layer_types".into()));
        }

        let vocab_size = f.required_positive("vocab_size")?;
        let hidden_size = f.required_positive("hidden_size")?;
        let intermediate_size = f.required_positive("intermediate_size")?;
        let num_hidden_layers = f.required_positive("num_hidden_layers")?;
        let num_attention_heads = f.required_positive("num_attention_heads")?;
        let num_key_value_heads = f
            .positive("num_key_value_heads")?
            .unwrap_or(num_attention_heads);
        if num_attention_heads % num_key_value_heads != 0 {
            return Err(f.error(
                "num_key_value_heads",
                format!(
                    "is {num_key_value_heads}, which does not divide num_attention_heads = {num_attention_heads}"
                ),
            ));
        }
        let head_dim = match f.positive("head_dim")? {
            Some(d) => d,
            None if hidden_size % num_attention_heads == 0 => hidden_size / num_attention_heads,
            None => {
                return Err(f.error(
                    "head_dim",
                    format!(
                        "is missing and hidden_size = {hidden_size} is not a multiple of num_attention_heads = {num_attention_heads}"
                    ),
                ));
            }
        };
        if head_dim % 2 != 0 {
            return Err(f.error(
                "head_dim",
                format!("is {head_dim}; RoPE needs an even head_dim"),
            ));
        }
        let rms_norm_eps = f.number("rms_norm_eps")?.unwrap_or(1e-6);
        // Checked as the f32 the model uses: a tiny f64 rounds to 0.
        if !((rms_norm_eps as f32) > 0.0 && rms_norm_eps < 1.0) {
            return Err(f.error(
                "rms_norm_eps",
                format!("is {rms_norm_eps}, expected 0 < eps < 1 (and above 0 as an f32)"),
            ));
        }
        let rope_parameters = f.object("rope_parameters")?;
        let rope_theta = match f.number("rope_theta")? {
            Some(theta) => theta,
            None => match rope_parameters {
                Some(p) => Fields::new(path, p)
                    .number("rope_theta")?
                    .unwrap_or(10000.0),
                None => 10000.0,
            },
        };
        if !(rope_theta > 1.0 && rope_theta.is_finite()) {
            return Err(f.error("rope_theta", format!("is {rope_theta}, expected > 1")));
        }
        let max_position_embeddings = f.positive("max_position_embeddings")?.unwrap_or(32768);
        let rope_scaling = match f.object("rope_scaling")? {
            Some(scaling) => {
                parse_rope_scaling(path, "rope_scaling", scaling, &f, max_position_embeddings)?
            }
            None => match rope_parameters {
                Some(p) => {
                    parse_rope_scaling(path, "rope_parameters", p, &f, max_position_embeddings)?
                }
                None => RopeScaling::None,
            },
        };

        let headwise = f.bool("headwise_attn_output_gate")?.unwrap_or(false);
        let elementwise = f.bool("elementwise_attn_output_gate")?.unwrap_or(false);
        let gate = match (headwise, elementwise) {
            (false, false) => GateMode::None,
            (true, false) => GateMode::Headwise,
            (false, true) => GateMode::Elementwise,
            (true, true) => {
                return Err(f.error(
                    "headwise_attn_output_gate",
                    "and elementwise_attn_output_gate are both true; a model has at most one gate"
                        .into(),
                ));
            }
        };
        let attention_bias =
            f.bool("attention_bias")?.unwrap_or(false) || f.bool("qkv_bias")?.unwrap_or(false);

        let config = Qwen3Config {
            vocab_size,
            hidden_size,
            intermediate_size,
            num_hidden_layers,
            num_attention_heads,
            num_key_value_heads,
            head_dim,
            rms_norm_eps: rms_norm_eps as f32,
            rope_theta,
            rope_scaling,
            max_position_embeddings,
            tie_word_embeddings: f.bool("tie_word_embeddings")?.unwrap_or(false),
            attention_bias,
            use_qk_norm: f.bool("use_qk_norm")?.unwrap_or(true),
            gate,
            bos_token_id: f
                .token_ids("bos_token_id")?
                .map(|ids| {
                    f.check_in_vocab("bos_token_id", &ids, vocab_size)
                        .map(|()| ids)
                })
                .transpose()?
                .and_then(|ids| ids.first().copied()),
            eos_token_ids: f
                .token_ids("eos_token_id")?
                .map(|ids| {
                    f.check_in_vocab("eos_token_id", &ids, vocab_size)
                        .map(|()| ids)
                })
                .transpose()?
                .unwrap_or_default(),
            quantized_int8: parse_quantization(path, &f)?,
        };
        let parameters = config.parameter_count_wide();
        if parameters > u128::from(MAX_PARAMETERS) {
            return Err(f.unsupported(format!(
                "its sizes describe a model of {parameters} parameters, more than the {MAX_PARAMETERS} any machine can hold (corrupted sizes?)"
            )));
        }
        Ok(config)
    }
}

/// `gattn_quantization`: absent (weights as stored) or `{"format": Q8_FORMAT, "block": 64}`.
/// Any other format or block size is refused: this build could not read the weights.
fn parse_quantization(path: &Path, top: &Fields<'_>) -> Result<bool> {
    use gattn_kernels::matmul::{Q8_FORMAT, int8::layout::BLOCK};
    let Some(object) = top.object(QUANTIZATION_KEY)? else {
        return Ok(false);
    };
    let q = Fields::new(path, object).prefixed(QUANTIZATION_KEY);
    match q.string("format")? {
        Some(format) if format == Q8_FORMAT => {}
        Some(other) => {
            return Err(q.error(
                "format",
                format!("is \"{other}\"; this build reads only \"{Q8_FORMAT}\""),
            ));
        }
        None => return Err(q.error("format", format!("is missing (expected \"{Q8_FORMAT}\")"))),
    }
    match q.positive("block")? {
        Some(BLOCK) => Ok(true),
        Some(other) => Err(q.error("block", format!("is {other}, expected {BLOCK}"))),
        None => Err(q.error("block", format!("is missing (expected {BLOCK})"))),
    }
}

/// `rope_scaling` (legacy) or `rope_parameters` (transformers 5): `type`/`rope_type` of
/// default, linear or yarn; anything else is refused rather than silently ignored.
fn parse_rope_scaling(
    path: &Path,
    field: &str,
    scaling: &Map<String, Value>,
    top: &Fields<'_>,
    max_position_embeddings: usize,
) -> Result<RopeScaling> {
    let s = Fields::new(path, scaling).prefixed(field);
    let kind = match s.string("rope_type")? {
        Some(kind) => kind,
        None => s.string("type")?.unwrap_or("default"),
    };
    let factor = s.number("factor")?;
    let check_factor = |factor: f64| -> Result<f64> {
        if factor.is_finite() && factor >= 1.0 {
            Ok(factor)
        } else {
            Err(s.error("factor", format!("is {factor}, expected >= 1")))
        }
    };
    match kind {
        "default" => Ok(RopeScaling::None),
        "linear" => {
            let factor =
                factor.ok_or_else(|| s.error("factor", "is missing for linear scaling".into()))?;
            Ok(RopeScaling::Linear {
                factor: check_factor(factor)?,
            })
        }
        "yarn" => {
            let original = match s.positive("original_max_position_embeddings")? {
                Some(n) => n,
                None => top
                    .positive("original_max_position_embeddings")?
                    .unwrap_or(max_position_embeddings),
            };
            // Without a factor, transformers takes max_position_embeddings / original.
            let factor = match factor {
                Some(f) => check_factor(f)?,
                None if max_position_embeddings >= original => {
                    max_position_embeddings as f64 / original as f64
                }
                None => {
                    return Err(s.error(
                        "factor",
                        format!(
                            "is missing, and max_position_embeddings / \
                             original_max_position_embeddings = {max_position_embeddings} / \
                             {original} is below 1"
                        ),
                    ));
                }
            };
            let yarn = YarnParams {
                factor,
                original_max_position_embeddings: original,
                attention_factor: s.number("attention_factor")?,
                beta_fast: s.number("beta_fast")?.unwrap_or(32.0),
                beta_slow: s.number("beta_slow")?.unwrap_or(1.0),
                mscale: s.number("mscale")?,
                mscale_all_dim: s.number("mscale_all_dim")?,
                truncate: s.bool("truncate")?.unwrap_or(true),
            };
            yarn.check()
                .map_err(|(field, reason)| s.error(field, reason))?;
            Ok(RopeScaling::Yarn(yarn))
        }
        other => Err(s.error(
            "rope_type",
            format!("is \"{other}\"; supported: default, linear, yarn"),
        )),
    }
}

/// A config is a few KB; anything near this is not one.
const MAX_CONFIG_BYTES: u64 = 4 << 20;

/// A JSON object file of a checkpoint (config.json, generation_config.json), read as a regular
/// file of at most a few MB and parsed strictly.
pub(crate) fn read_json_object(path: &Path) -> Result<Map<String, Value>> {
    let text = read_regular_to_string(path, MAX_CONFIG_BYTES).map_err(|source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_json_object(path, &text)
}

/// Strictly: a key given twice is an error (which one would hold?), not the last one.
fn parse_json_object(path: &Path, text: &str) -> Result<Map<String, Value>> {
    parse_strict_object(text).map_err(|reason| ModelError::InvalidJson {
        path: path.to_path_buf(),
        reason,
    })
}

/// Typed access to the fields of one JSON object, with errors that name file and field.
struct Fields<'a> {
    path: &'a Path,
    object: &'a Map<String, Value>,
    prefix: String,
}

impl<'a> Fields<'a> {
    fn new(path: &'a Path, object: &'a Map<String, Value>) -> Self {
        Fields {
            path,
            object,
            prefix: String::new(),
        }
    }

    fn prefixed(mut self, prefix: &str) -> Self {
        self.prefix = format!("{prefix}.");
        self
    }

    fn error(&self, field: &str, reason: String) -> ModelError {
        ModelError::Config {
            path: PathBuf::from(self.path),
            field: format!("{}{field}", self.prefix),
            reason,
        }
    }

    fn unsupported(&self, reason: String) -> ModelError {
        ModelError::Unsupported {
            path: PathBuf::from(self.path),
            reason,
        }
    }

    /// The field's value, treating JSON null as absent.
    fn get(&self, field: &str) -> Option<&'a Value> {
        self.object.get(field).filter(|v| !v.is_null())
    }

    fn wrong_type(&self, field: &str, expected: &str, value: &Value) -> ModelError {
        self.error(field, format!("is {value}, expected {expected}"))
    }

    fn string(&self, field: &str) -> Result<Option<&'a str>> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(self.wrong_type(field, "a string", v)),
        }
    }

    fn bool(&self, field: &str) -> Result<Option<bool>> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.wrong_type(field, "true or false", v)),
        }
    }

    fn number(&self, field: &str) -> Result<Option<f64>> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(v) => Err(self.wrong_type(field, "a number", v)),
        }
    }

    fn object(&self, field: &str) -> Result<Option<&'a Map<String, Value>>> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Object(o)) => Ok(Some(o)),
            Some(v) => Err(self.wrong_type(field, "an object or null", v)),
        }
    }

    /// A positive integer that fits the sizes we allocate (at most 2^31).
    fn positive(&self, field: &str) -> Result<Option<usize>> {
        match self.get(field) {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if n > 0 && n <= (1 << 31) => Ok(Some(n as usize)),
                _ => Err(self.wrong_type(field, "a positive integer (at most 2^31)", v)),
            },
        }
    }

    fn required_positive(&self, field: &str) -> Result<usize> {
        self.positive(field)?
            .ok_or_else(|| self.error(field, "is missing".into()))
    }

    /// A token id or a list of them (generation_config.json often holds a list of eos ids).
    fn token_ids(&self, field: &str) -> Result<Option<Vec<u32>>> {
        let as_id = |v: &Value| {
            v.as_u64()
                .filter(|&n| n <= u32::MAX as u64)
                .map(|n| n as u32)
        };
        match self.get(field) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| as_id(item).ok_or_else(|| self.wrong_type(field, "token ids", item)))
                .collect::<Result<Vec<u32>>>()
                .map(Some),
            Some(v) => as_id(v)
                .map(|id| Some(vec![id]))
                .ok_or_else(|| self.wrong_type(field, "a token id or a list of them", v)),
        }
    }

    /// A token id the model could never produce (or read) would never stop generation.
    fn check_in_vocab(&self, field: &str, ids: &[u32], vocab_size: usize) -> Result<()> {
        match ids.iter().find(|&&id| id as usize >= vocab_size) {
            Some(id) => Err(self.error(
                field,
                format!("holds {id}, outside the vocabulary of {vocab_size} tokens (vocab_size)"),
            )),
            None => Ok(()),
        }
    }
}
