use bytes::Bytes;

use super::*;

fn text_stream() -> State {
    State::new(Config {
        content_type: "text/plain".into(),
        ttl_secs: None,
        expires_at_ms: None,
    })
}

fn append(body: &str) -> Append {
    Append {
        content_type: Some("text/plain".into()),
        messages: vec![Bytes::copy_from_slice(body.as_bytes())],
        ..Append::default()
    }
}

fn by(id: &str, epoch: u64, seq: u64, body: &str) -> Append {
    Append {
        producer: Some(ProducerClaim {
            id: id.into(),
            epoch,
            seq,
        }),
        ..append(body)
    }
}

/// Apply an append that must be written; the state after it.
fn written(state: &State, a: &Append) -> State {
    match decide_append(state, a) {
        Ok(Outcome::Write { state, .. }) => state,
        other => panic!("expected a write, got {other:?}"),
    }
}

#[test]
fn an_append_needs_a_body_and_the_streams_content_type() {
    let s = text_stream();
    let empty = Append {
        content_type: Some("text/plain".into()),
        ..Append::default()
    };
    assert!(matches!(
        decide_append(&s, &empty),
        Err(Refusal::Invalid(_))
    ));
    let untyped = Append {
        content_type: None,
        ..append("x")
    };
    assert!(matches!(
        decide_append(&s, &untyped),
        Err(Refusal::Invalid(_))
    ));
    let json = Append {
        content_type: Some("application/json".into()),
        ..append("{}")
    };
    assert_eq!(decide_append(&s, &json), Err(Refusal::ContentType));
    // Content types compare by essence, case-insensitively.
    let shouting = Append {
        content_type: Some("TEXT/PLAIN; charset=utf-8".into()),
        ..append("x")
    };
    written(&s, &shouting);
}

#[test]
fn stream_seq_must_rise_bytewise() {
    let mut s = text_stream();
    for (seq, ok) in [
        ("2", true),
        ("10", false),
        ("2", false),
        ("3", true),
        ("B", true),
        ("a", true),
        ("B", false),
    ] {
        let a = Append {
            stream_seq: Some(seq.into()),
            ..append("x")
        };
        match decide_append(&s, &a) {
            Ok(Outcome::Write { state, .. }) => {
                assert!(ok, "{seq} was accepted");
                s = state;
            }
            Err(Refusal::SeqRegression) => assert!(!ok, "{seq} was refused"),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn producers_are_exactly_once_and_fenced_by_epoch() {
    let s = text_stream();
    let s = written(&s, &by("p", 0, 0, "a"));
    // A retry is a duplicate answered with the highest accepted seq.
    let s = written(&s, &by("p", 0, 1, "b"));
    assert_eq!(
        decide_append(&s, &by("p", 0, 0, "a")),
        Ok(Outcome::Duplicate {
            producer: Producer { epoch: 0, seq: 1 }
        })
    );
    // A gap names what was expected.
    assert_eq!(
        decide_append(&s, &by("p", 0, 3, "d")),
        Err(Refusal::SeqGap {
            expected: 2,
            received: 3
        })
    );
    // A new epoch starts at 0 and fences the old one.
    assert!(matches!(
        decide_append(&s, &by("p", 1, 5, "x")),
        Err(Refusal::Invalid(_))
    ));
    let s = written(&s, &by("p", 1, 0, "new"));
    assert_eq!(
        decide_append(&s, &by("p", 0, 2, "zombie")),
        Err(Refusal::StaleEpoch { current: 1 })
    );
    // Producers are independent.
    written(&s, &by("q", 0, 0, "other"));
}

#[test]
fn a_closed_stream_refuses_appends_but_not_retries_or_closes() {
    let s = text_stream();
    let close = Append {
        close: true,
        ..by("p", 0, 0, "last")
    };
    let closed = written(&s, &close);
    assert!(closed.closed);
    // The closing producer's retry is a duplicate, whatever its body.
    assert!(matches!(
        decide_append(
            &closed,
            &Append {
                close: true,
                ..by("p", 0, 0, "other")
            }
        ),
        Ok(Outcome::Duplicate { .. })
    ));
    // A stale epoch is fenced before the closure is looked at.
    let fenced = written(&s, &by("p", 2, 0, "x"));
    let fenced = written(
        &fenced,
        &Append {
            close: true,
            ..append("y")
        },
    );
    assert_eq!(
        decide_append(&fenced, &by("p", 1, 0, "z")),
        Err(Refusal::StaleEpoch { current: 2 })
    );
    assert_eq!(
        decide_append(&closed, &append("more")),
        Err(Refusal::Closed)
    );
    assert_eq!(
        decide_append(&closed, &by("p", 0, 1, "more")),
        Err(Refusal::Closed)
    );
    // Closing again without a body is idempotent.
    let again = Append {
        content_type: None,
        close: true,
        ..Append::default()
    };
    assert_eq!(written(&closed, &again), closed);
}

#[test]
fn a_create_matches_by_configuration_and_fork() {
    let s = text_stream();
    let mut asked = s.config.clone();
    asked.content_type = "Text/Plain".into();
    assert_eq!(decide_create(&s, &asked, None), Recreate::Same);
    asked.ttl_secs = Some(60);
    assert_eq!(decide_create(&s, &asked, None), Recreate::Conflict);
    let origin = ForkOrigin {
        source: "src".into(),
        offset: 3,
        sub: 0,
    };
    assert_eq!(
        decide_create(&s, &s.config, Some(&origin)),
        Recreate::Conflict
    );
}

#[test]
fn json_bodies_flatten_one_level_and_keep_their_bytes() {
    let m = json_messages(br#"[{"a": 1}, [1,2], "s"]"#).unwrap();
    let texts: Vec<&[u8]> = m.iter().map(|b| b.as_ref()).collect();
    assert_eq!(texts, [br#"{"a": 1}"#.as_ref(), b"[1,2]", br#""s""#]);
    assert_eq!(json_messages(b" {\"x\":1} ").unwrap().len(), 1);
    assert!(json_messages(b"[]").unwrap().is_empty());
    assert_eq!(json_messages(b"[[[1]]]").unwrap()[0].as_ref(), b"[[1]]");
    assert!(json_messages(b"{ invalid }").is_err());
}

#[test]
fn ttls_and_producer_integers_are_strict() {
    assert_eq!(parse_ttl("3600"), Some(3600));
    assert_eq!(parse_ttl("0"), Some(0));
    for bad in ["", "-1", "+60", "060", "60.5", "1e3", "abc"] {
        assert_eq!(parse_ttl(bad), None, "{bad}");
    }
    assert_eq!(parse_producer_int("9007199254740991"), Some(MAX_SAFE));
    for bad in ["", "1abc", "-1", "9007199254740992", "1.0"] {
        assert_eq!(parse_producer_int(bad), None, "{bad}");
    }
}
