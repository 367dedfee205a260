//! `shepherd-gateway` in front of a P/D pool (one server labelled `prefill`, one `decode`, on
//! loopback): a long uncached prompt goes to the decode server with the prefill server's
//! `ip:port` in `x-prefiller-host-port`, the header llm-d's decode-side routing sidecar reads;
//! a short one goes there without it; a client cannot name a prefill server itself. Against
//! a simulated P/D pool (`shepherd-sim serve` with roles, whose decode servers run the
//! routing sidecar's protocol), the long prompt is prefilled on the prefill server and decoded
//! on the decode server, both counted in their metrics; when the prefill server dies
//! mid-request the decode server serves the request aggregated. With encode disaggregation
//! (E/P/D), a chat request carrying an image reaches the decode server with the encode
//! servers' `ip:port` list in `x-encoder-hosts-ports`; a text one without it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{MODEL, SERVER_HEADER, Setup, TestGateway, echo_upstream};
use serde_json::json;
use shepherd_sim::serve::{
    self, PREFILL_FALLBACK_HEADER, PREFILL_SERVER_HEADER, ServeConfig, ServeHandle,
};

/// The P/D policy both adapters' end-to-end tests run.
const PD: &str = include_str!("../../../examples/disagg/policy.yaml");

#[tokio::test]
async fn a_long_prompt_reaches_the_decode_server_naming_its_prefill_server() {
    let (prefill, prefill_seen) = echo_upstream().await;
    let (decode, decode_seen) = echo_upstream().await;
    let gateway = Setup::new([prefill, decode])
        .roles(&[Some("prefill"), Some("decode")])
        .yaml(PD)
        .without_scraping()
        .start()
        .await;

    // 8 KB of text: about 2,000 tokens, none cached anywhere.
    let long = json!({"model": "model-a", "prompt": "long document ".repeat(600), "max_tokens": 4});
    let response = gateway
        .http
        .post(gateway.url("/v1/completions"))
        .header("x-prefiller-host-port", "10.9.9.9:1") // a client's guess, removed
        .json(&long)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    {
        let seen = decode_seen.lock();
        assert_eq!(seen.len(), 1, "the decode server answers");
        assert_eq!(
            seen[0].headers["x-prefiller-host-port"],
            prefill.to_string().as_str()
        );
    }
    assert!(
        prefill_seen.lock().is_empty(),
        "the sidecar, not the gateway, calls the prefill server"
    );

    // A short prompt is served aggregated: no header.
    let short = json!({"model": "model-a", "prompt": "hi", "max_tokens": 4});
    let response = gateway
        .http
        .post(gateway.url("/v1/completions"))
        .header("x-prefiller-host-port", "10.9.9.9:1")
        .json(&short)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let seen = decode_seen.lock();
    assert_eq!(seen.len(), 2);
    assert!(seen[1].headers.get("x-prefiller-host-port").is_none());
}

/// The E/P/D policy both adapters' end-to-end tests run.
const EPD: &str = include_str!("../../../examples/disagg/encode-policy.yaml");

#[tokio::test]
async fn a_media_request_reaches_the_decode_server_naming_its_encode_servers() {
    let mut servers = Vec::new();
    let mut seen = Vec::new();
    for _ in 0..4 {
        let (addr, log) = echo_upstream().await;
        servers.push(addr);
        seen.push(log);
    }
    let gateway = Setup::new(servers.clone())
        .roles(&[
            Some("encode"),
            Some("encode"),
            Some("prefill"),
            Some("decode"),
        ])
        .yaml(EPD)
        .without_scraping()
        .start()
        .await;
    let chat = |image: bool| {
        let mut parts = vec![json!({"type": "text", "text": "What is in this picture?"})];
        if image {
            parts.push(
                json!({"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}),
            );
        }
        json!({"model": "model-a", "messages": [{"role": "user", "content": parts}], "max_tokens": 4})
    };
    for image in [true, false] {
        let response = gateway
            .http
            .post(gateway.url("/v1/chat/completions"))
            .header("x-encoder-hosts-ports", "10.9.9.9:1") // a client's guess, removed
            .json(&chat(image))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    let decoded = seen[3].lock();
    assert_eq!(decoded.len(), 2, "the decode server answers both");
    let mut named: Vec<&str> = decoded[0].headers["x-encoder-hosts-ports"]
        .to_str()
        .unwrap()
        .split(',')
        .collect();
    named.sort_unstable();
    let mut encoders = vec![servers[0].to_string(), servers[1].to_string()];
    encoders.sort_unstable();
    assert_eq!(
        named, encoders,
        "both encode servers (maxNumOfEndpoints: 2)"
    );
    assert!(
        decoded[0].headers.get("x-prefiller-host-port").is_none(),
        "a short prompt is prefilled on the decode server"
    );
    assert!(
        decoded[1].headers.get("x-encoder-hosts-ports").is_none(),
        "a text request is not encoded apart, and the client's value is removed"
    );
    for encoder in &seen[..3] {
        assert!(
            encoder.lock().is_empty(),
            "the sidecar, not the gateway, calls the encode and prefill servers"
        );
    }
}

/// Server 0 prefills, server 1 decodes, at `speed`.
async fn pd_sims(speed: f64) -> ServeHandle {
    let mut config = ServeConfig::ephemeral(2);
    config.speed = speed;
    config.roles = vec!["prefill".into(), "decode".into()];
    serve::spawn(config).await.unwrap()
}

/// `shepherd-gateway` with the P/D policy in front of `prefill` and `decode`, labelled by role,
/// both scraped once.
async fn pd_gateway(prefill: std::net::SocketAddr, decode: std::net::SocketAddr) -> TestGateway {
    let gateway = Setup::new([prefill, decode])
        .roles(&[Some("prefill"), Some("decode")])
        .yaml(PD)
        .start()
        .await;
    gateway.wait_scraped().await;
    gateway
}

/// The value of the metric line `name{...} value`.
fn metric(text: &str, name: &str) -> f64 {
    serve::metric_sample(text, name).unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

async fn sim_metrics(http: &reqwest::Client, addr: std::net::SocketAddr) -> String {
    let r = http
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap();
    r.text().await.unwrap()
}

fn header<'a>(r: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    r.headers().get(name).and_then(|v| v.to_str().ok())
}

#[tokio::test]
async fn a_simulated_pd_pool_prefills_on_the_prefill_server_and_decodes_on_the_decode_server() {
    let sims = pd_sims(50.0).await;
    let (prefill, decode) = (sims.addrs()[0], sims.addrs()[1]);
    let gateway = pd_gateway(prefill, decode).await;

    for (i, stream) in [false, true].into_iter().enumerate() {
        let prompt = format!("document {i} ").repeat(700);
        let body = json!({"model": MODEL, "prompt": prompt, "max_tokens": 5, "stream": stream});
        let response = gateway.post("/v1/completions", &body).await;
        assert_eq!(response.status(), 200);
        assert_eq!(
            header(&response, SERVER_HEADER),
            Some("1"),
            "decoded on the decode server"
        );
        assert_eq!(
            header(&response, PREFILL_SERVER_HEADER),
            Some("0"),
            "prefilled on the prefill server"
        );
        let text = response.text().await.unwrap();
        assert_eq!(text.matches(" tok").count(), 5, "{text}");
    }
    let p = sim_metrics(&gateway.http, prefill).await;
    assert_eq!(
        metric(&p, "shepherd_sim_prefills_for_remote_decode_total"),
        2.0
    );
    assert_eq!(
        metric(&p, "vllm:generation_tokens_total"),
        2.0,
        "one token per prefill"
    );
    let d = sim_metrics(&gateway.http, decode).await;
    assert_eq!(metric(&d, "shepherd_sim_remote_prefills_total"), 2.0);
    assert!(metric(&d, "shepherd_sim_kv_transfer_tokens_total") > 2.0 * 1500.0);
    assert_eq!(metric(&d, "vllm:generation_tokens_total"), 10.0);

    // A short prompt stays on the decode server, aggregated.
    let short = json!({"model": MODEL, "prompt": "hi", "max_tokens": 3});
    let response = gateway.post("/v1/completions", &short).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, SERVER_HEADER), Some("1"));
    assert!(header(&response, PREFILL_SERVER_HEADER).is_none());
    gateway.wait_idle().await;
}

#[tokio::test]
async fn a_prefill_server_dying_mid_request_does_not_lose_the_request() {
    // Slow: a 2,000-token prefill runs for about a second of wall time.
    let mut sims = pd_sims(0.05).await;
    let (prefill, decode) = (sims.addrs()[0], sims.addrs()[1]);
    let gateway = pd_gateway(prefill, decode).await;

    let body = json!({"model": MODEL, "prompt": "chapter ".repeat(1000), "max_tokens": 2});
    let in_flight = {
        let (http, url) = (gateway.http.clone(), gateway.url("/v1/completions"));
        tokio::spawn(async move { http.post(url).json(&body).send().await.unwrap() })
    };
    let mut prefilling = false;
    for _ in 0..1000 {
        prefilling = sims.running_requests(0) >= Some(1);
        if prefilling {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(prefilling, "the prefill server took the prefill");
    assert!(sims.stop(0).await);

    let response = in_flight.await.unwrap();
    assert_eq!(
        response.status(),
        200,
        "served aggregated by the decode server"
    );
    assert_eq!(header(&response, SERVER_HEADER), Some("1"));
    assert!(header(&response, PREFILL_FALLBACK_HEADER).is_some());
    assert_eq!(response.text().await.unwrap().matches(" tok").count(), 2);
    let d = sim_metrics(&gateway.http, decode).await;
    assert_eq!(
        metric(&d, "shepherd_sim_remote_prefill_fallbacks_total"),
        1.0
    );
    gateway.wait_idle().await;
}
