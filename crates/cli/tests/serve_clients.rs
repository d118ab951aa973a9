//! `gattn-cpu serve` driven as its users drive it: RULER's `VLLMClient` (four `PUT /generate`
//! at once), many concurrent clients, a client that hangs up, and the `openai` Python package.

mod serve_support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use serve_support::{Server, run_greedy};

/// Prompts the tiny model answers with different texts.
const PROMPTS: [&str; 8] = [
    "It is a truth universally acknowledged",
    "The gate",
    "Once upon a time",
    "In the beginning",
    "She said that",
    "The number is",
    "What is the",
    "A long time ago",
];

#[test]
fn rulers_vllm_client_requests_four_at_once_get_runs_greedy_text() {
    let server = Server::start(&[]);
    // Byte for byte what RULER's pred/client_wrappers.py VLLMClient sends (json.dumps of its
    // request, PUT with a JSON content type) with run.sh's sampling: temperature 0, top_k 32.
    let request = |prompt: &str| {
        format!(
            "{{\"prompt\": {}, \"max_tokens\": 32, \"temperature\": 0.0, \"top_k\": 32, \"top_p\": 1.0, \"stop\": []}}",
            Value::String(prompt.to_string())
        )
    };
    std::thread::scope(|scope| {
        let answers: Vec<_> = PROMPTS[..4]
            .iter()
            .map(|&prompt| {
                let (server, body) = (&server, request(prompt));
                scope.spawn(move || (prompt, server.send("PUT", "/generate", &body, &[])))
            })
            .collect();
        for answer in answers {
            let (prompt, (status, body)) = answer.join().unwrap();
            assert_eq!(status, 200, "{body}");
            assert_eq!(body["text"], json!([run_greedy(prompt, 32)]), "{prompt:?}");
        }
    });
}

#[test]
fn eight_concurrent_clients_are_all_answered_as_one_at_a_time() {
    let server = Server::start(&["--parallel", "2"]);
    let body = |i: usize| {
        // Half greedy, half sampled with a seed: both must not depend on what runs beside them.
        let temperature = if i.is_multiple_of(2) { 0.0 } else { 0.9 };
        json!({"prompt": PROMPTS[i], "max_tokens": 40, "temperature": temperature, "seed": i})
    };
    let text = |response: &(u16, Value)| {
        assert_eq!(response.0, 200, "{}", response.1);
        response.1["choices"][0]["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let one_at_a_time: Vec<String> = (0..8)
        .map(|i| text(&server.post("/v1/completions", &body(i))))
        .collect();
    let at_once: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let server = &server;
                let body = body(i);
                scope.spawn(move || server.post("/v1/completions", &body))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| text(&h.join().unwrap()))
            .collect()
    });
    assert_eq!(at_once, one_at_a_time);
    let distinct: std::collections::HashSet<_> = one_at_a_time.iter().collect();
    assert!(
        distinct.len() > 4,
        "the prompts give different texts: {one_at_a_time:?}"
    );
}

#[test]
fn a_client_that_hangs_up_mid_stream_cancels_its_generation() {
    let server = Server::start(&[]);
    let address = server.base.trim_start_matches("http://");
    // Greedy from "a" runs to the end of the context (1024 tokens, a second or more).
    let body =
        json!({"prompt": "a", "max_tokens": 100000, "temperature": 0, "stream": true}).to_string();
    let mut socket = TcpStream::connect(address).unwrap();
    write!(
        socket,
        "POST /v1/completions HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reader = BufReader::new(socket.try_clone().unwrap());
    let mut line = String::new();
    while !line.starts_with("data: ") {
        line.clear();
        reader.read_line(&mut line).unwrap();
    }
    drop(reader);
    drop(socket);
    let logged = server.wait_for_line(|l| l.starts_with("request 1:"), Duration::from_secs(30));
    let logged = logged.unwrap_or_else(|| panic!("no log line:\n{}", server.log()));
    assert!(logged.contains("| cancelled |"), "{logged}");
    // The worker is free again.
    let (status, _) = server.post("/v1/completions", &json!({"prompt": "a", "max_tokens": 2}));
    assert_eq!(status, 200);
}

/// A private venv with the `openai` package under the target directory, made once; `None`
/// (with the reason printed) where python3 is absent or PyPI cannot be reached.
fn openai_python() -> Option<PathBuf> {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("SKIPPED: python3 is absent, so the openai client test does not run");
        return None;
    }
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("openai-venv");
    let python = venv.join("bin/python");
    let has_openai = |python: &Path| {
        Command::new(python)
            .args(["-c", "import openai"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if has_openai(&python) {
        return Some(python);
    }
    let made = Command::new("python3")
        .arg("-m")
        .arg("venv")
        .arg(&venv)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "python3 -m venv failed: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    let pip = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "openai",
        ])
        .output()
        .unwrap();
    if !pip.status.success() {
        eprintln!(
            "SKIPPED: pip cannot install openai (is PyPI reachable?), so the openai client test does not run:\n{}",
            String::from_utf8_lossy(&pip.stderr)
        );
        return None;
    }
    Some(python)
}

#[test]
fn the_openai_python_package_completes_streams_and_scores() {
    let Some(python) = openai_python() else {
        return;
    };
    let server = Server::start(&["--api-key", "sesame"]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/openai_client.py");
    let out = Command::new(python)
        .arg(script)
        .args([&server.base, "sesame"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\nserver:\n{}", server.log());
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["completion"], run_greedy(PROMPTS[0], 24));
}
