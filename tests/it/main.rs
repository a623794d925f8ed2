//! The one integration test binary: the real server started on port 0
//! in-process (`api`), and the real binary as a user runs it (`cli`).

mod ag_ui;
mod api;
mod auth;
mod chat;
mod cli;
mod common;
mod compress;
mod conformance;
mod controls;
mod crash;
mod ds;
mod ds_session;
mod full_disk;
mod fuzz;
mod hostile;
mod index;
mod kept;
mod layout;
mod live;
mod messages;
mod mux;
mod observe;
mod packaging;
mod publish;
mod redis;
mod serve;
mod shared;
mod silence;
mod traces;
mod ws_deflate;
