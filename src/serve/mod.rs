//! The HTTP/1.1 server: accepts connections and serves the router on them.
//! A connection whose first request is a GET for an event stream is served
//! by [`events`], which holds no HTTP buffers while the stream is idle;
//! every other connection goes to hyper (with upgrades, for WebSocket),
//! with the bytes already read given back to it first. TLS and HTTP/2
//! belong to the proxy in front.

mod events;
mod head;
mod rewind;
mod stop;
mod timer;

use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// How long a client may take to send a request's head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// Serve `app` on `listener` until `shutdown`, then finish the requests in
/// flight (streams end on `shutdown` themselves) and return.
pub async fn http1(listener: TcpListener, app: crate::http::App, shutdown: CancellationToken) {
    use hyper_util::rt::TokioIo;
    use hyper_util::service::TowerToHyperService;

    let connections = tokio_util::task::TaskTracker::new();
    let stops = stop::Shutdown::default();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(8192)
        .writev(true);
    loop {
        let (mut stream, _peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let mut http = http.clone();
        http.timer(timer::ConnTimer::default());
        // Polled at every wake of the connection's task.
        let mut stop = stops.watch();
        connections.spawn(async move {
            let first = tokio::select! {
                h = head::read(&mut stream, HEAD_TIMEOUT) => h,
                _ = &mut stop => return,
            };
            let prefix = match first {
                head::Head::Closed => return,
                head::Head::Events(req) => return events::serve(stream, *req, app).await,
                head::Head::Other(prefix) => prefix,
            };
            let io = TokioIo::new(rewind::Rewind::new(prefix, stream));
            let conn = http
                .serve_connection(io, TowerToHyperService::new(app))
                .with_upgrades();
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = &mut stop => {
                    // Finish the request in flight, then close (no keep-alive).
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    drop(listener);
    stops.stop();
    connections.close();
    connections.wait().await;
}
