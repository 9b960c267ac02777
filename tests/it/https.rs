//! The native client over HTTPS, against an in-test TLS server (rustls, with the test CA and
//! server certificate of tests/fixtures/tls, made by scripts/make-test-tls): a private CA through
//! `--ca-cert`, one clear `error:` line without it, `--insecure` working and recorded, HTTP/2
//! offered in ALPN, proxies taken from the environment.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tls");

/// The server's certificate, and the ALPN protocols each client hello offered.
#[derive(Debug)]
struct Recording {
    key: Arc<CertifiedKey>,
    alpn: Arc<Mutex<Vec<Vec<String>>>>,
}

impl ResolvesServerCert for Recording {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let offered =
            hello.alpn().map(|protocols| protocols.map(|p| String::from_utf8_lossy(p).into_owned()).collect());
        self.alpn.lock().unwrap().push(offered.unwrap_or_default());
        Some(self.key.clone())
    }
}

struct TlsMock {
    url: String,
    alpn: Arc<Mutex<Vec<Vec<String>>>>,
    /// Requests that got through the handshake, by their first line.
    requests: Arc<Mutex<Vec<String>>>,
}

/// An HTTPS server speaking HTTP/1.1 only (its ALPN says so), one thread per connection:
/// `GET /v1/models` lists "tls-model", any POST streams three tokens, usage and `[DONE]`. Its
/// certificate is the test CA's `server.pem`.
fn tls_mock() -> TlsMock {
    tls_mock_with("server")
}

/// As [`tls_mock`], presenting tests/fixtures/tls/`NAME`.pem (key `NAME`.key).
fn tls_mock_with(name: &str) -> TlsMock {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(format!("{FIXTURES}/{name}.pem")).unwrap().map(Result::unwrap).collect();
    let key = PrivateKeyDer::from_pem_file(format!("{FIXTURES}/{name}.key")).unwrap();
    let signing = provider.key_provider.load_private_key(key).unwrap();
    let alpn = Arc::new(Mutex::new(Vec::new()));
    let resolver = Recording { key: Arc::new(CertifiedKey::new(chain, signing)), alpn: alpn.clone() };
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}/v1", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let (config, seen) = (config.clone(), seen.clone());
            thread::spawn(move || {
                let connection = rustls::ServerConnection::new(config).unwrap();
                serve(&mut rustls::StreamOwned::new(connection, tcp), &seen);
            });
        }
    });
    TlsMock { url, alpn, requests }
}

fn serve(stream: &mut impl ReadWrite, seen: &Mutex<Vec<String>>) {
    let mut buffer = Vec::new();
    let mut piece = [0u8; 4096];
    loop {
        // One request: its head, then content-length bytes of body.
        let (head_end, length) = loop {
            if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                break (end + 4, length);
            }
            match stream.read(&mut piece) {
                Ok(0) | Err(_) => return, // closed, or the handshake failed
                Ok(n) => buffer.extend_from_slice(&piece[..n]),
            }
        };
        while buffer.len() < head_end + length {
            match stream.read(&mut piece) {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&piece[..n]),
            }
        }
        let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
        buffer.drain(..head_end + length);
        seen.lock().unwrap().push(head.lines().next().unwrap_or_default().to_string());
        let (content_type, body) = if head.starts_with("GET /v1/models") {
            ("application/json", r#"{"object":"list","data":[{"id":"tls-model","object":"model"}]}"#.to_string())
        } else {
            let token = |t: &str| {
                format!("data: {{\"choices\":[{{\"index\":0,\"text\":\"{t}\",\"finish_reason\":null}}]}}\n\n")
            };
            let usage = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":3}}\n\n";
            ("text/event-stream", format!("{}{}{}{usage}data: [DONE]\n\n", token("a"), token("b"), token("c")))
        };
        let reply =
            format!("HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n{body}", body.len());
        if stream.write_all(reply.as_bytes()).and_then(|()| stream.flush()).is_err() {
            return;
        }
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// `tokenmeter bench` against `url` with `args`; the result JSON when it wrote one.
fn bench(url: &str, name: &str, args: &[&str], env: &[(&str, &str)]) -> (Output, Option<serde_json::Value>) {
    let dir = std::env::temp_dir().join(format!("tokenmeter-https-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("result.json");
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .args(["bench", "--endpoint", url, "--no-baseline", "--num-requests", "3", "--rate", "inf"])
        .args(["--input-len", "4", "--output-len", "3", "--timeout-s", "20", "--json"])
        .arg(&json)
        .args(args)
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(start.elapsed() < Duration::from_secs(60), "bench {args:?} took {:?}", start.elapsed());
    let result = std::fs::read_to_string(&json).ok().map(|text| serde_json::from_str(&text).unwrap());
    (out, result)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_private_ca_is_trusted_with_ca_cert_and_h2_is_offered() {
    let m = tls_mock();
    let ca = format!("{FIXTURES}/ca.pem");
    let (out, result) = bench(&m.url, "ca", &["--ca-cert", &ca], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Requests: 3\nFailed: 0\n"), "{}", text(&out.stdout));
    let result = result.expect("results written");
    let tls = &result["run_config"]["target"]["tls"];
    assert_eq!((tls["verify"].as_bool(), tls["ca_cert"].as_str()), (Some(true), Some(ca.as_str())), "{tls}");
    assert_eq!(result["run_config"]["target"]["model"], "tls-model");
    // Every connection offered HTTP/2 first, then HTTP/1.1 (this server picks 1.1).
    let offered = m.alpn.lock().unwrap().clone();
    assert!(offered.len() >= 4, "{offered:?}"); // GET /v1/models and three requests
    assert!(offered.iter().all(|o| o == &["h2", "http/1.1"]), "{offered:?}");
}

#[test]
fn an_unknown_certificate_is_one_clear_error_and_insecure_is_recorded() {
    let m = tls_mock();
    let (out, result) = bench(&m.url, "unknown", &[], &[]);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains("certificate") && errors[0].contains("--ca-cert"), "{stderr}");
    assert!(result.is_none() && !stderr.contains("panicked"), "{stderr}");
    assert!(m.requests.lock().unwrap().is_empty(), "nothing got past the handshake");

    let (out, result) = bench(&m.url, "insecure", &["--insecure"], &[]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("--insecure: the server's certificate is not verified"), "{stderr}");
    let tls = &result.expect("results written")["run_config"]["target"]["tls"];
    assert_eq!((tls["verify"].as_bool(), tls["insecure"].as_bool()), (Some(false), Some(true)), "{tls}");

    // A --ca-cert that is not a certificate is a usage error, before anything is sent.
    let (out, _) = bench(&m.url, "bad-ca", &["--ca-cert", &format!("{FIXTURES}/server.key")], &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.lines().any(|l| l.starts_with("error: --ca-cert") && l.contains("no PEM certificate")), "{stderr}");
}

/// The usual one-liner's self-signed certificate (`openssl req -x509 … -addext
/// subjectAltName=IP:127.0.0.1`, marked CA:TRUE), passed as `--ca-cert`, is trusted: pinned, as
/// curl trusts it. A different self-signed certificate is refused, and so is the pinned one under a
/// name it does not carry; each error says why.
#[test]
fn a_self_signed_certificate_passed_as_ca_cert_is_pinned() {
    let m = tls_mock_with("selfsigned");
    let pinned = format!("{FIXTURES}/selfsigned.pem");
    let (out, result) = bench(&m.url, "pinned", &["--ca-cert", &pinned], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Requests: 3\nFailed: 0\n"), "{}", text(&out.stdout));
    let tls = &result.expect("results written")["run_config"]["target"]["tls"];
    assert_eq!(tls["verify"].as_bool(), Some(true), "{tls}");

    let error_line = |out: &Output| {
        let stderr = text(&out.stderr);
        let errors: Vec<String> = stderr.lines().filter(|l| l.starts_with("error:")).map(String::from).collect();
        assert!(!out.status.success() && errors.len() == 1 && !stderr.contains("panicked"), "{stderr}");
        errors[0].clone()
    };
    let (out, _) = bench(&m.url, "other-pin", &["--ca-cert", &format!("{FIXTURES}/other-selfsigned.pem")], &[]);
    let error = error_line(&out);
    assert!(error.contains("CaUsedAsEndEntity") && error.contains("pass that very certificate"), "{error}");

    let by_name = m.url.replace("127.0.0.1", "localhost");
    let (out, _) = bench(&by_name, "pinned-wrong-name", &["--ca-cert", &pinned], &[]);
    let error = error_line(&out);
    assert!(error.contains("does not name the host"), "{error}");
    assert_eq!(m.requests.lock().unwrap().len(), 4, "only the pinned run's requests got through");
}

/// `HTTPS_PROXY` is honoured: the client asks the proxy to CONNECT to the server.
#[test]
fn proxies_come_from_the_environment() {
    let proxy = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    thread::spawn(move || {
        for mut tcp in proxy.incoming().flatten() {
            let mut head = [0u8; 1024];
            let n = tcp.read(&mut head).unwrap_or(0);
            seen.lock().unwrap().push(text(&head[..n]).lines().next().unwrap_or_default().to_string());
            let _ = tcp.write_all(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n");
        }
    });
    let (out, _) = bench(
        "https://tokenmeter-proxy-test.invalid:8443/v1",
        "proxy",
        &["--served-model", "m"],
        &[("HTTPS_PROXY", &proxy_url)],
    );
    let asked = asked.lock().unwrap().clone();
    assert!(!out.status.success(), "the proxy refuses");
    assert!(asked.iter().any(|l| l.starts_with("CONNECT tokenmeter-proxy-test.invalid:8443")), "{asked:?}");
}
