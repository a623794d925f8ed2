//! The ingest floor (issue 36 item 3): an axum server that only reads and
//! parses the JSON body of `POST /v1/sessions/{id}/events` and answers a
//! small JSON reply, on two worker threads like the server under test. No
//! validation, no actor, no store, no frames. Started as
//! `load --ingest-floor --listen ADDR`.

use axum::body::Bytes;
use axum::extract::Path;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

async fn events(Path(_session): Path<String>, body: Bytes) -> Json<Value> {
    // Parsed as the server parses it (one object, or NDJSON lines).
    let n = match serde_json::from_slice::<Value>(&body) {
        Ok(_) => 1,
        Err(_) => body
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
            .count(),
    };
    Json(json!({"accepted": n, "duplicates": 0, "cursor": 0}))
}

/// Serve until killed.
pub fn main(listen: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let l = tokio::net::TcpListener::bind(listen).await.expect("bind");
        println!("listening on http://{}", l.local_addr().unwrap());
        let app = Router::new().route("/v1/sessions/{session}/events", post(events));
        axum::serve(l, app).await.unwrap();
    });
}
