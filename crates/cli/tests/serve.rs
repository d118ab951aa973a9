//! `gattn-cpu serve` over HTTP: completions, chat, streaming, echo with log-probabilities equal
//! to `gattn-cpu logits`, stop strings, bad input, the API key and a clean stop on SIGTERM.

mod serve_support;

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use serve_support::{BIN, Server, run_greedy};

const PROMPT: &str = "It is a truth universally acknowledged";

fn completion(server: &Server, body: Value) -> Value {
    let (status, response) = server.post("/v1/completions", &body);
    assert_eq!(status, 200, "{response}");
    response
}

#[test]
fn a_greedy_completion_equals_run_and_reports_usage() {
    let server = Server::start(&[]);
    let response = completion(
        &server,
        json!({"model": "x", "prompt": PROMPT, "max_tokens": 24, "temperature": 0}),
    );
    let choice = &response["choices"][0];
    assert_eq!(choice["text"], run_greedy(PROMPT, 24));
    assert_eq!(response["object"], "text_completion");
    let usage = &response["usage"];
    assert_eq!(usage["completion_tokens"], 24);
    assert_eq!(choice["finish_reason"], "length");
    let (_, tokens) = server.post("/tokenize", &json!({"content": PROMPT}));
    let ids = tokens["tokens"].as_array().unwrap().clone();
    assert_eq!(usage["prompt_tokens"], ids.len());
    assert_eq!(usage["total_tokens"], ids.len() + 24);

    // The same prompt as token ids, and back through /detokenize.
    let by_ids = completion(
        &server,
        json!({"prompt": ids, "max_tokens": 24, "temperature": 0}),
    );
    assert_eq!(by_ids["choices"][0]["text"], choice["text"]);
    let (status, text) = server.post("/detokenize", &json!({"tokens": ids}));
    assert_eq!((status, text["content"].as_str()), (200, Some(PROMPT)));
    let (_, pieces) = server.post("/tokenize", &json!({"content": "ab", "with_pieces": true}));
    assert_eq!(pieces["tokens"][0]["piece"], "a");

    let (status, models) = server.get("/v1/models");
    assert_eq!(status, 200);
    assert_eq!(models["data"][0]["id"], "builtin:elementwise");
}

/// A little-endian f32 .npy of shape `[rows, cols]`.
fn read_npy_2d(path: &Path) -> Vec<Vec<f32>> {
    let bytes = std::fs::read(path).unwrap();
    let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + header_len]).unwrap();
    let shape: Vec<usize> = header
        .split("'shape': (")
        .nth(1)
        .unwrap()
        .split(')')
        .next()
        .unwrap()
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().unwrap())
        .collect();
    let values: Vec<f32> = bytes[10 + header_len..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    values.chunks_exact(shape[1]).map(<[f32]>::to_vec).collect()
}

fn log_softmax(row: &[f32]) -> Vec<f64> {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let lse = max
        + row
            .iter()
            .map(|&x| (x as f64 - max).exp())
            .sum::<f64>()
            .ln();
    row.iter().map(|&x| x as f64 - lse).collect()
}

#[test]
fn echo_logprobs_are_the_log_softmax_of_the_logits_command() {
    let ids = [
        73u32, 116, 32, 105, 115, 32, 97, 32, 116, 114, 117, 116, 104,
    ];
    let ids_text = ids.map(|i| i.to_string()).join(",");
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("logits.npy");
    let out = Command::new(BIN)
        .args([
            "logits",
            "-m",
            "builtin:elementwise",
            "--prompt-ids",
            &ids_text,
        ])
        .arg("--out")
        .arg(&npy)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected: Vec<Vec<f64>> = read_npy_2d(&npy).iter().map(|r| log_softmax(r)).collect();

    let server = Server::start(&[]);
    // lm-evaluation-harness's loglikelihood request: echo, logprobs 1, max_tokens 0 or 1.
    for max_tokens in [0, 1] {
        let response = completion(
            &server,
            json!({"prompt": [ids], "max_tokens": max_tokens, "temperature": 0, "logprobs": 3, "echo": true}),
        );
        let choice = &response["choices"][0];
        let logprobs = &choice["logprobs"];
        let token_logprobs = logprobs["token_logprobs"].as_array().unwrap();
        assert_eq!(token_logprobs.len(), ids.len() + max_tokens);
        assert!(token_logprobs[0].is_null() && logprobs["top_logprobs"][0].is_null());
        for i in 1..ids.len() {
            let want = expected[i - 1][ids[i] as usize];
            let got = token_logprobs[i].as_f64().unwrap();
            assert!((got - want).abs() < 1e-4, "token {i}: {got} vs {want}");
            let top = logprobs["top_logprobs"][i].as_object().unwrap();
            let mut row = expected[i - 1].clone();
            row.sort_by(|a, b| b.total_cmp(a));
            let best = top
                .values()
                .map(|v| v.as_f64().unwrap())
                .fold(f64::MIN, f64::max);
            assert!(
                (best - row[0]).abs() < 1e-4,
                "top of row {i}: {best} vs {}",
                row[0]
            );
            assert!(!top.is_empty() && top.len() <= 3);
        }
        assert!(
            choice["text"]
                .as_str()
                .unwrap()
                .starts_with("It is a truth")
        );
        assert_eq!(response["usage"]["completion_tokens"], max_tokens);
    }
}

#[test]
fn streaming_gives_the_same_text_as_one_response_then_done() {
    let server = Server::start(&[]);
    let body = json!({"prompt": PROMPT, "max_tokens": 30, "temperature": 0, "stream": true});
    let chunks = server.stream("/v1/completions", &body);
    assert_eq!(chunks.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = chunks[..chunks.len() - 1]
        .iter()
        .map(|c| serde_json::from_str(c).unwrap())
        .collect();
    let text: String = chunks
        .iter()
        .map(|c| c["choices"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, run_greedy(PROMPT, 30));
    assert!(
        chunks.len() > 2,
        "one chunk per token or so, not one at the end"
    );
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "length"
    );

    // Chat: the role first, then content deltas, then the finish reason.
    let messages = json!([{"role": "user", "content": "Who is there?"}]);
    let (status, whole) = server.post(
        "/v1/chat/completions",
        &json!({"messages": messages, "max_tokens": 20, "temperature": 0}),
    );
    assert_eq!(status, 200, "{whole}");
    let chunks = server.stream(
        "/v1/chat/completions",
        &json!({"messages": messages, "max_tokens": 20, "temperature": 0, "stream": true}),
    );
    assert_eq!(chunks.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = chunks[..chunks.len() - 1]
        .iter()
        .map(|c| serde_json::from_str(c).unwrap())
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(
        text,
        whole["choices"][0]["message"]["content"].as_str().unwrap()
    );
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        whole["choices"][0]["finish_reason"]
    );
    // The chat prompt is the template's rendering of the conversation.
    let rendered = "<|im_start|>user\nWho is there?<|im_end|>\n<|im_start|>assistant\n";
    let (_, ids) = server.post("/tokenize", &json!({"content": rendered}));
    assert_eq!(
        whole["usage"]["prompt_tokens"],
        ids["tokens"].as_array().unwrap().len()
    );
}

#[test]
fn a_stop_string_ends_the_text_before_it() {
    let server = Server::start(&[]);
    let full = run_greedy(PROMPT, 40);
    let chars: Vec<char> = full.chars().collect();
    let stop: String = chars[10..13].iter().collect();
    let before = &full[..full.find(&stop).unwrap()];
    for stream in [false, true] {
        let body = json!({"prompt": PROMPT, "max_tokens": 40, "temperature": 0, "stop": [stop, "\u{1F600}"], "stream": stream});
        let (text, finish) = if stream {
            let chunks = server.stream("/v1/completions", &body);
            let chunks: Vec<Value> = chunks[..chunks.len() - 1]
                .iter()
                .map(|c| serde_json::from_str(c).unwrap())
                .collect();
            let text: String = chunks
                .iter()
                .map(|c| c["choices"][0]["text"].as_str().unwrap())
                .collect();
            (
                text,
                chunks.last().unwrap()["choices"][0]["finish_reason"].clone(),
            )
        } else {
            let response = completion(&server, body);
            let choice = &response["choices"][0];
            (
                choice["text"].as_str().unwrap().to_string(),
                choice["finish_reason"].clone(),
            )
        };
        assert_eq!(text, before, "stream: {stream}");
        assert_eq!(finish, "stop");
    }
}

fn assert_error(response: (u16, Value), status: u16, words: &str) {
    assert_eq!(response.0, status, "{}", response.1);
    let message = response.1["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", response.1));
    assert!(message.contains(words), "{message:?} lacks {words:?}");
    assert!(response.1["error"]["type"].is_string());
}

/// The status of a request whose Content-Length is over the 16 MiB limit: the server answers
/// from the header, so the body is never sent (sending it would race the server's close).
fn declared_body_over_limit(server: &Server) -> u16 {
    use std::io::{Read, Write};
    let address = server.base.trim_start_matches("http://");
    let mut socket = std::net::TcpStream::connect(address).unwrap();
    write!(
        socket,
        "POST /v1/completions HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        17 << 20
    )
    .unwrap();
    let mut head = [0u8; 12];
    socket.read_exact(&mut head).unwrap();
    let head = String::from_utf8_lossy(&head).into_owned();
    head["HTTP/1.1 ".len()..].parse().unwrap()
}

#[test]
fn bad_input_gets_a_4xx_with_a_message_and_the_server_keeps_serving() {
    let server = Server::start(&["-c", "64"]);
    let post = |body: &str| server.send("POST", "/v1/completions", body, &[]);
    assert_error(post("{\"prompt\": "), 400, "not valid JSON");
    assert_error(post("{\"prompt\": 5}"), 400, "prompt must be");
    assert_error(post("{\"max_tokens\": 3}"), 400, "no prompt");
    assert_error(
        post("{\"prompt\": [1, 99999]}"),
        400,
        "token id 99999 is out of the vocabulary (0..320)",
    );
    assert_error(post("{\"prompt\": [1, -3]}"), 400, "non-negative integers");
    assert_error(
        post("{\"prompt\": \"a\", \"max_tokens\": -1}"),
        400,
        "max_tokens must be >= 0",
    );
    assert_error(
        post("{\"prompt\": \"a\", \"temperature\": -1}"),
        400,
        "temperature",
    );
    assert_error(post("{\"prompt\": \"a\", \"top_p\": 0}"), 400, "top_p");
    assert_error(
        post("{\"prompt\": \"a\", \"stop\": 3}"),
        400,
        "stop must be",
    );
    assert_error(
        post("{\"prompt\": \"a\", \"logprobs\": 50}"),
        400,
        "logprobs must be between 0 and 20",
    );
    assert_error(post("{\"prompt\": \"a\", \"n\": 2}"), 400, "n = 1");
    let long = "x".repeat(100);
    let (status, body) = server.post("/v1/completions", &json!({"prompt": long}));
    assert_error(
        (status, body.clone()),
        400,
        "the prompt has 100 tokens but the context is 64 tokens",
    );
    assert_eq!(body["error"]["code"], "context_length_exceeded");
    assert_error(
        server.post("/generate", &json!({"prompt": long})),
        400,
        "has 100 tokens",
    );
    // More text than any tokenization of it could fit in -c 64 is refused before tokenizing.
    let huge = "x".repeat((1 << 20) + 1);
    let (status, body) = server.post("/v1/completions", &json!({"prompt": huge}));
    assert_error(
        (status, body.clone()),
        400,
        "the prompt is 1048577 bytes, more than the 1048576 read for a context of 64 tokens",
    );
    assert_eq!(body["error"]["code"], "context_length_exceeded");
    assert_eq!(declared_body_over_limit(&server), 413);
    assert_error(
        server.post("/v1/chat/completions", &json!({"messages": []})),
        400,
        "messages must be",
    );
    assert_error(
        server.post(
            "/v1/chat/completions",
            &json!({"messages": [{"content": "x"}]}),
        ),
        400,
        "messages[0]: no `role`",
    );
    assert_error(server.get("/v1/nothing"), 404, "no such endpoint");
    assert_error(server.send("DELETE", "/generate", "", &[]), 405, "method");
    assert_error(
        server.post("/detokenize", &json!({"tokens": [400]})),
        400,
        "out of the vocabulary",
    );

    // Unknown fields are ignored; max_tokens past the context is clamped to what fits.
    let response = completion(
        &server,
        json!({"prompt": "x".repeat(60), "max_tokens": 1000, "temperature": 0, "frequency_penalty": 0.5, "user": "me"}),
    );
    let usage = &response["usage"];
    assert_eq!(usage["prompt_tokens"], 60);
    assert!(usage["completion_tokens"].as_u64().unwrap() <= 5, "{usage}");
    let finish = &response["choices"][0]["finish_reason"];
    assert!(finish == "length" || finish == "stop", "{finish}");
    assert_eq!(server.get("/health").0, 200);
}

#[test]
fn an_api_key_is_required_except_for_health_and_sigterm_exits_0() {
    let server = Server::start(&["--api-key", "sesame"]);
    let body = json!({"prompt": "a", "max_tokens": 2}).to_string();
    assert_error(
        server.send("POST", "/v1/completions", &body, &[]),
        401,
        "API key",
    );
    let wrong = [("Authorization", "Bearer nope")];
    assert_error(
        server.send("POST", "/v1/completions", &body, &wrong),
        401,
        "API key",
    );
    let right = [("Authorization", "Bearer sesame")];
    assert_eq!(server.send("POST", "/v1/completions", &body, &right).0, 200);
    assert_eq!(server.get("/health").0, 200);
    let (status, log) = server.terminate();
    assert!(status.success(), "{status:?}\n{log}");
    assert!(log.contains("server stopped"), "{log}");
    assert!(
        log.contains("request 1: /v1/completions: prompt 1 tokens"),
        "the per-request line:\n{log}"
    );
}

#[test]
fn serve_refuses_what_run_refuses_before_listening() {
    let out = Command::new(BIN)
        .args(["serve", "-m", "/nonexistent/model", "--port", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/model"), "{stderr}");
    let out = Command::new(BIN)
        .args([
            "serve",
            "-m",
            "builtin:elementwise",
            "--port",
            "0",
            "--parallel",
            "0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "clap refuses --parallel 0");
}
