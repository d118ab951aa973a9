//! A `gattn-cpu serve` child on a free loopback port, killed when dropped (also when a test
//! fails), and a small blocking HTTP client for it.

#![allow(dead_code)] // each test file uses its own part of this

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_gattn-cpu");

pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    log: Arc<Mutex<Vec<String>>>,
    lines: Mutex<Receiver<String>>,
}

impl Server {
    /// `gattn-cpu serve -m builtin:elementwise --port 0 -t 1` plus `extra`, once it answers /health.
    pub fn start(extra: &[&str]) -> Server {
        let mut child = Command::new(BIN)
            .args([
                "serve",
                "-m",
                "builtin:elementwise",
                "--port",
                "0",
                "-t",
                "1",
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary starts");
        let stderr = child.stderr.take().unwrap();
        let (send, lines) = channel();
        let log = Arc::new(Mutex::new(Vec::new()));
        let log_writer = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                log_writer.lock().unwrap().push(line.clone());
                send.send(line).ok();
            }
        });
        let mut server = Server {
            child,
            base: String::new(),
            log,
            lines: Mutex::new(lines),
        };
        let line = server
            .wait_for_line(|l| l.contains(" on http://"), Duration::from_secs(60))
            .unwrap_or_else(|| panic!("no address printed; stderr:\n{}", server.log()));
        let address = line.split(" on http://").nth(1).unwrap();
        let address = address.split_whitespace().next().unwrap();
        server.base = format!("http://{address}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while server.get("/health").0 != 200 {
            assert!(
                Instant::now() < deadline,
                "no /health; stderr:\n{}",
                server.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    /// Everything the server printed on stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// The next stderr line (after those already waited for) that matches, within `timeout`.
    pub fn wait_for_line(
        &self,
        matches: impl Fn(&str) -> bool,
        timeout: Duration,
    ) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            match self.lines.lock().unwrap().recv_timeout(left) {
                Ok(line) if matches(&line) => return Some(line),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        respond(ureq::get(&format!("{}{path}", self.base)).call())
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send("POST", path, &body.to_string(), &[])
    }

    /// Any method, a raw body and extra headers.
    pub fn send(
        &self,
        method: &str,
        path: &str,
        body: &str,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let mut request = ureq::request(method, &format!("{}{path}", self.base))
            .set("Content-Type", "application/json");
        for (name, value) in headers {
            request = request.set(name, value);
        }
        respond(request.send_string(body))
    }

    /// The `data:` payloads of a streamed response, `[DONE]` included.
    pub fn stream(&self, path: &str, body: &Value) -> Vec<String> {
        let response = ureq::post(&format!("{}{path}", self.base))
            .send_string(&body.to_string())
            .expect("the stream starts");
        assert_eq!(response.header("content-type"), Some("text/event-stream"));
        BufReader::new(response.into_reader())
            .lines()
            .map(Result::unwrap)
            .filter_map(|line| line.strip_prefix("data: ").map(str::to_string))
            .collect()
    }

    /// SIGTERM, then the exit status (bounded wait).
    pub fn terminate(mut self) -> (ExitStatus, String) {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the reader thread take the last lines.
                std::thread::sleep(Duration::from_millis(100));
                return (status, self.log());
            }
            assert!(Instant::now() < deadline, "no exit after SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

fn respond(result: Result<ureq::Response, ureq::Error>) -> (u16, Value) {
    let response = match result {
        Ok(response) => response,
        Err(ureq::Error::Status(_, response)) => response,
        Err(error) => panic!("request failed: {error}"),
    };
    let status = response.status();
    let text = response.into_string().unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

/// `gattn-cpu run` on the builtin elementwise model, greedy: its text (stdout less the newline).
pub fn run_greedy(prompt: &str, max_tokens: usize) -> String {
    let output = Command::new(BIN)
        .args([
            "run",
            "-m",
            "builtin:elementwise",
            "-t",
            "1",
            "--temperature",
            "0",
        ])
        .args(["-n", &max_tokens.to_string(), "-p", prompt])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    text.strip_suffix('\n').unwrap().to_string()
}
