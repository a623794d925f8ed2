//! What the layers around the router skip when a request does not need
//! them. CORS answers only requests with an `Origin` (a browser sends one
//! with every cross-origin request) and preflights: for the rest its
//! headers (`Access-Control-Expose-Headers`, a list of 230 bytes) meant
//! nothing, and each request paid a header map built for them. Compression
//! starts at [`MIN_COMPRESSED`] bytes: an ingest reply of 80 bytes was
//! gzipped (a new deflate state, and the reply chunked) for every client
//! that accepts gzip, as most HTTP libraries say they do.

use std::sync::Arc;
use std::task::{Context, Poll};

use axum::http::header::ORIGIN;
use axum::http::{Method, Request, Response};
use futures_util::future::Either;
use tower::{Layer, Service};
use tower_http::compression::predicate::{And, NotForContentType, Predicate, SizeAbove};
use tower_http::cors::{Cors, CorsLayer};

/// Responses smaller than this go uncompressed: below a kilobyte gzip
/// saves a few bytes at the price of a deflate state and chunking.
pub const MIN_COMPRESSED: u16 = 1024;

/// When a response is worth compressing: as tower-http's default (not
/// gRPC, images or event streams, which `edge` gzips itself) but from
/// [`MIN_COMPRESSED`] bytes, and only with `http.compression` on.
pub type Worth =
    And<And<And<And<SizeAbove, NotForContentType>, NotForContentType>, NotForContentType>, Enabled>;

/// [`Worth`] with `http.compression` as configured.
pub fn worth(enabled: bool) -> Worth {
    SizeAbove::new(MIN_COMPRESSED)
        .and(NotForContentType::GRPC)
        .and(NotForContentType::IMAGES)
        .and(NotForContentType::SSE)
        .and(Enabled(enabled))
}

/// Compression predicate: on or off by `http.compression`.
#[derive(Clone, Copy)]
pub struct Enabled(bool);

impl Predicate for Enabled {
    fn should_compress<B: axum::body::HttpBody>(&self, _: &Response<B>) -> bool {
        self.0
    }
}

/// `inner` behind CORS for the requests CORS is for: those with an
/// `Origin`, and preflights (`OPTIONS`). The CORS layer is shared and put
/// around `inner` for those requests only: the service is cloned for every
/// request, and a `Cors` service held beside `inner` cloned its lists and
/// a second copy of every layer inside it each time (1% of a single-event
/// POST's instructions).
#[derive(Clone)]
pub struct CorsWhenAsked<S> {
    cors: Arc<CorsLayer>,
    inner: S,
}

impl<S> CorsWhenAsked<S> {
    pub fn new(layer: CorsLayer, inner: S) -> Self {
        CorsWhenAsked {
            cors: Arc::new(layer),
            inner,
        }
    }
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for CorsWhenAsked<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone,
    Cors<S>: Service<Request<ReqB>, Response = Response<ResB>, Error = S::Error>,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = Either<<Cors<S> as Service<Request<ReqB>>>::Future, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqB>) -> Self::Future {
        if req.method() == Method::OPTIONS || req.headers().contains_key(ORIGIN) {
            // The service polled ready goes behind CORS; a clone stays.
            let clone = self.inner.clone();
            let ready = std::mem::replace(&mut self.inner, clone);
            Either::Left(self.cors.layer(ready).call(req))
        } else {
            Either::Right(self.inner.call(req))
        }
    }
}
