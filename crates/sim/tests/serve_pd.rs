//! `shepherd-sim serve` as a prefill/decode pool over real loopback HTTP: the decode side's
//! routing sidecar prefills a request naming `x-prefiller-host-port` on that server, the
//! decode engine reads the KV and decodes; a prefill server that fails (refused, reset
//! mid-request, wrong role) leaves the request served aggregated on the decode server.
#![cfg(feature = "serve")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use shepherd_sim::serve::{
    self, DEFAULT_MODEL, PREFILL_ADDRESS_HEADER, PREFILL_FALLBACK_HEADER, PREFILL_SERVER_HEADER,
    PREFILLER_HEADER, SERVER_HEADER, ServeConfig, ServeHandle,
};

/// Server 0 prefills, servers 1 and 2 decode.
async fn pd_pool(speed: f64) -> ServeHandle {
    let mut config = ServeConfig::ephemeral(3);
    config.speed = speed;
    config.roles = vec!["prefill".into(), "decode".into(), "decode".into()];
    serve::spawn(config).await.expect("servers start")
}

/// A 2,000-token prompt nobody caches.
fn long_prompt(tag: &str) -> String {
    format!("{tag} ").repeat(8000 / (tag.len() + 1))
}

fn body(prompt: &str, extra: Value) -> Value {
    let mut b = json!({"model": DEFAULT_MODEL, "prompt": prompt, "max_tokens": 4});
    if let (Some(b), Value::Object(extra)) = (b.as_object_mut(), extra) {
        b.extend(extra);
    }
    b
}

async fn send(
    client: &reqwest::Client,
    to: SocketAddr,
    prefiller: Option<&str>,
    body: &Value,
) -> reqwest::Response {
    let mut request = client
        .post(format!("http://{to}/v1/completions"))
        .json(body);
    if let Some(p) = prefiller {
        request = request.header(PREFILLER_HEADER, p);
    }
    request.send().await.expect("request sent")
}

fn metric(text: &str, name: &str) -> f64 {
    serve::metric_sample(text, name).unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

async fn metrics(client: &reqwest::Client, addr: SocketAddr) -> String {
    let r = client.get(format!("http://{addr}/metrics")).send().await;
    r.unwrap().text().await.unwrap()
}

fn header<'a>(r: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    r.headers().get(name).and_then(|v| v.to_str().ok())
}

#[tokio::test]
async fn a_named_prefill_server_prefills_and_the_decode_server_decodes() {
    let pool = pd_pool(50.0).await;
    let (prefill, decode) = (pool.addrs()[0], pool.addrs()[1]);
    let client = reqwest::Client::new();
    let prompt = long_prompt("alpha");
    let response = send(
        &client,
        decode,
        Some(&prefill.to_string()),
        &body(&prompt, json!({})),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, SERVER_HEADER), Some("1"));
    assert_eq!(header(&response, PREFILL_SERVER_HEADER), Some("0"));
    assert_eq!(
        header(&response, PREFILL_ADDRESS_HEADER),
        Some(prefill.to_string().as_str())
    );
    assert!(header(&response, PREFILL_FALLBACK_HEADER).is_none());
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["choices"][0]["text"], " tok tok tok tok");
    assert_eq!(answer["usage"]["completion_tokens"], 4);
    let prompt_tokens = answer["usage"]["prompt_tokens"].as_f64().unwrap();
    assert!(
        answer.get("kv_transfer_params").is_none(),
        "only a prefill answers them"
    );

    // The prefill server computed the prompt and generated the one token the sidecar asked for.
    let p = metrics(&client, prefill).await;
    assert_eq!(
        metric(&p, "shepherd_sim_prefills_for_remote_decode_total"),
        1.0
    );
    assert_eq!(metric(&p, "vllm:prompt_tokens_total"), prompt_tokens);
    assert_eq!(metric(&p, "vllm:generation_tokens_total"), 1.0);
    // The decode server read the whole prompt's KV and generated the answer.
    let d = metrics(&client, decode).await;
    assert_eq!(metric(&d, "shepherd_sim_remote_prefills_total"), 1.0);
    assert_eq!(
        metric(&d, "shepherd_sim_kv_transfer_tokens_total"),
        prompt_tokens
    );
    assert_eq!(metric(&d, "vllm:generation_tokens_total"), 4.0);
    assert_eq!(
        metric(&d, "shepherd_sim_remote_prefill_fallbacks_total"),
        0.0
    );
    // The third server saw nothing.
    let idle = metrics(&client, pool.addrs()[2]).await;
    assert_eq!(metric(&idle, "vllm:prompt_tokens_total"), 0.0);

    // Streamed: the same path, the answer streamed by the decode server.
    let streamed = body(&long_prompt("beta"), json!({"stream": true}));
    let response = send(&client, decode, Some(&prefill.to_string()), &streamed).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, PREFILL_SERVER_HEADER), Some("0"));
    let text = response.text().await.unwrap();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    assert_eq!(text.matches(" tok").count(), 4, "{text}");
}

#[tokio::test]
async fn a_decode_server_that_caches_the_prompt_reads_only_the_rest() {
    let pool = pd_pool(50.0).await;
    let (prefill, decode) = (pool.addrs()[0], pool.addrs()[1]);
    let client = reqwest::Client::new();
    let prompt = long_prompt("gamma");
    // Served aggregated first: the decode server caches the prompt.
    let first = send(&client, decode, None, &body(&prompt, json!({}))).await;
    assert_eq!(first.status(), 200);
    let second = send(
        &client,
        decode,
        Some(&prefill.to_string()),
        &body(&prompt, json!({})),
    )
    .await;
    assert_eq!(second.status(), 200);
    let answer: Value = second.json().await.unwrap();
    let prompt_tokens = answer["usage"]["prompt_tokens"].as_f64().unwrap();
    let d = metrics(&client, decode).await;
    let moved = metric(&d, "shepherd_sim_kv_transfer_tokens_total");
    assert!(
        moved < 16.0,
        "{moved} of {prompt_tokens} tokens moved: the cached blocks stay"
    );
}

#[tokio::test]
async fn a_prefill_server_failing_mid_request_leaves_the_request_served_aggregated() {
    // Slow: the 2,000-token prefill takes about 60 ms simulated, 1.2 s of wall time.
    let mut pool = pd_pool(0.05).await;
    let (prefill, decode) = (pool.addrs()[0], pool.addrs()[1]);
    let client = reqwest::Client::new();
    let request = body(&long_prompt("delta"), json!({"max_tokens": 2}));
    let in_flight = {
        let client = client.clone();
        let target = prefill.to_string();
        tokio::spawn(async move { send(&client, decode, Some(&target), &request).await })
    };
    // Wait until the prefill server runs the prefill, then kill it.
    let mut running = false;
    for _ in 0..1000 {
        running = pool.running_requests(0) >= Some(1);
        if running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(running, "the prefill server took the prefill");
    assert!(pool.stop(0).await);

    let response = in_flight.await.unwrap();
    assert_eq!(response.status(), 200, "the request is not lost");
    assert_eq!(header(&response, SERVER_HEADER), Some("1"));
    assert!(header(&response, PREFILL_SERVER_HEADER).is_none());
    let reason = header(&response, PREFILL_FALLBACK_HEADER)
        .expect("says why")
        .to_owned();
    assert!(reason.contains(&prefill.to_string()), "{reason}");
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["choices"][0]["text"], " tok tok");
    let d = metrics(&client, decode).await;
    assert_eq!(
        metric(&d, "shepherd_sim_remote_prefill_fallbacks_total"),
        1.0
    );
    assert_eq!(metric(&d, "shepherd_sim_remote_prefills_total"), 0.0);
}

#[tokio::test]
async fn unreachable_or_wrong_prefill_servers_fall_back_and_roles_are_kept() {
    let mut pool = pd_pool(50.0).await;
    let (prefill, decode, other_decode) = (pool.addrs()[0], pool.addrs()[1], pool.addrs()[2]);
    let client = reqwest::Client::new();
    let fallback = |r: &reqwest::Response| header(r, PREFILL_FALLBACK_HEADER).map(str::to_owned);

    // A decode-only server does not prefill for a remote decode...
    let direct = body(
        "hi",
        json!({"kv_transfer_params": {"do_remote_decode": true}}),
    );
    let refused = send(&client, other_decode, None, &direct).await;
    assert_eq!(refused.status(), 400);
    // ... so naming one as the prefill server falls back.
    let named = other_decode.to_string();
    let r = send(
        &client,
        decode,
        Some(&named),
        &body(&long_prompt("eps"), json!({})),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert!(fallback(&r).unwrap().contains("400"), "{:?}", fallback(&r));

    // Garbage and non-loopback names fall back without a call.
    let r = send(
        &client,
        decode,
        Some("not an address"),
        &body("hi", json!({})),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert!(fallback(&r).unwrap().contains("ip:port"));
    let r = send(&client, decode, Some("10.9.9.9:1"), &body("hi", json!({}))).await;
    assert_eq!(r.status(), 200);
    assert!(fallback(&r).unwrap().contains("loopback"));

    // A prefill-only server has no sidecar: it serves the request itself.
    let r = send(
        &client,
        prefill,
        Some(&decode.to_string()),
        &body("hi", json!({})),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, SERVER_HEADER), Some("0"));
    assert!(fallback(&r).is_none() && header(&r, PREFILL_SERVER_HEADER).is_none());

    // A stopped prefill server refuses the connection.
    assert!(pool.stop(0).await);
    let r = send(
        &client,
        decode,
        Some(&prefill.to_string()),
        &body("hi", json!({})),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert!(fallback(&r).is_some());
    let d = metrics(&client, decode).await;
    assert_eq!(
        metric(&d, "shepherd_sim_remote_prefill_fallbacks_total"),
        4.0
    );

    // A malformed body still gets its 400 from the decode server.
    let bad = client
        .post(format!("http://{decode}/v1/completions"))
        .header(PREFILLER_HEADER, prefill.to_string())
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
}
