//! Where a 2025-11-25 HTTP session's messages go when several requests
//! stream at once, through the real binary (`mcp-tasks-shim http` in front
//! of the 2026-07-28 reference server): a question goes on the stream of
//! the call that asked it, a DELETE still answers the requests streaming,
//! and an answer whose stream the client closed never lands on the GET
//! stream (the 2025-11-25 transport forbids it). Every message read is
//! validated against the 2025-11-25 schema.

mod support;

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::http::{HttpShim, LEGACY, Sse, client, initialize, legacy, rpc, send};
use support::schema::{Revision, assert_valid};
use support::wire::modern_reference;

fn plain(tool: &str, arguments: Value) -> Value {
    json!({"name": tool, "arguments": arguments})
}

/// Opens request `body` in session `sid` as an SSE stream.
async fn stream(c: &reqwest::Client, url: &str, sid: &str, body: &Value) -> Sse {
    let resp = legacy(c, url, Some(sid), body).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    Sse::new(resp)
}

/// The next message of `s`, validated against the 2025-11-25 schema (an
/// answer as one to `answering`); `None` when the stream ended.
async fn next_valid(s: &mut Sse, answering: &str) -> Option<Value> {
    let m = s.next().await?;
    let answered = m.get("method").is_none().then_some(answering);
    assert_valid(Revision::Legacy, &m, answered);
    Some(m)
}

/// A blocking `tasks/result` of `task` on session `sid` (request id 2) and
/// the first thing its stream carries, which must be an elicitation.
async fn waiting_with_question(
    c: &reqwest::Client,
    url: &str,
    sid: &str,
    task: &str,
) -> (Sse, Value) {
    let mut waiting = stream(
        c,
        url,
        sid,
        &rpc(2, "tasks/result", json!({"taskId": task})),
    )
    .await;
    let question = next_valid(&mut waiting, "tasks/result")
        .await
        .expect("the task's question first");
    assert_eq!(question["method"], "elicitation/create", "{question}");
    (waiting, question)
}

/// Every message a POST's response carries (a JSON body, or an SSE
/// stream read to its end), each validated as one answering `answering`.
async fn messages_of(resp: reqwest::Response, answering: &str) -> Vec<Value> {
    if !support::http::is_sse(resp.headers()) {
        let m = resp.json::<Value>().await.unwrap();
        assert_valid(Revision::Legacy, &m, Some(answering));
        return vec![m];
    }
    let mut s = Sse::new(resp);
    let mut out = Vec::new();
    while let Some(m) = next_valid(&mut s, answering).await {
        out.push(m);
    }
    out
}

/// The client's answer to a confirmation question.
async fn confirm(c: &reqwest::Client, url: &str, sid: &str, question: &Value) {
    let answer = json!({"jsonrpc": "2.0", "id": question["id"],
        "result": {"action": "accept", "content": {"confirm": true}}});
    let (s, _, _) = send(legacy(c, url, Some(sid), &answer)).await;
    assert_eq!(s, StatusCode::ACCEPTED);
}

/// A `multi_input` task (two questions) in session `sid`; its id.
async fn multi_input_task(c: &reqwest::Client, url: &str, sid: &str) -> String {
    let mut call = plain("multi_input", json!({}));
    call["task"] = json!({"ttl": 60000});
    let (_, created, _) = send(legacy(c, url, Some(sid), &rpc(1, "tools/call", call))).await;
    assert_valid(Revision::Legacy, &created, Some("tools/call"));
    created["result"]["task"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned()
}

/// A plain call that asks a question, and a second call posted at once:
/// the question goes on the first call's stream (it went to the newest
/// call's, 28 times in 30). Ten rounds, each in its own session, all at
/// once: each waits on its other call's second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_goes_on_the_stream_of_the_call_that_asked() {
    let shim = HttpShim::spawn(&[], &modern_reference());
    let c = client();
    let mut rounds = tokio::task::JoinSet::new();
    for round in 0..10 {
        rounds.spawn(question_round(c.clone(), shim.url.clone(), round));
    }
    while let Some(r) = rounds.join_next().await {
        if let Err(e) = r {
            rounds.abort_all();
            std::panic::resume_unwind(e.into_panic());
        }
    }
}

/// One round of [`a_question_goes_on_the_stream_of_the_call_that_asked`]
/// in a session of its own.
async fn question_round(c: reqwest::Client, url: String, round: usize) {
    let url = url.as_str();
    let (sid, _) = initialize(&c, url, None).await;
    let asking = rpc(
        1,
        "tools/call",
        plain("confirm_delete", json!({"filename": "a.txt"})),
    );
    let other = rpc(
        2,
        "tools/call",
        plain("slow_compute", json!({"seconds": 1, "label": "b"})),
    );
    let (mut a, b) = tokio::join!(stream(&c, url, &sid, &asking), async {
        // Stays real: the second call goes out just after the first, on real sockets.
        tokio::time::sleep(Duration::from_millis(5)).await;
        legacy(&c, url, Some(&sid), &other).send().await.unwrap()
    });
    let question = next_valid(&mut a, "tools/call")
        .await
        .expect("a question on the asking call's stream");
    assert_eq!(
        question["method"], "elicitation/create",
        "round {round}: {question}"
    );
    confirm(&c, url, &sid, &question).await;
    let answer = next_valid(&mut a, "tools/call")
        .await
        .expect("the asking call's answer");
    assert_valid(Revision::Legacy, &answer, Some("tools/call"));
    assert_eq!(answer["id"], 1, "round {round}: {answer}");
    // The other call's answer comes alone (as JSON, or a stream with
    // nothing before it).
    let on_b = messages_of(b, "tools/call").await;
    assert_eq!(on_b.len(), 1, "round {round}: {on_b:#?}");
    assert_eq!(on_b[0]["id"], 2, "round {round}: {on_b:#?}");
}

/// A DELETE while a `tasks/result` streams (its question asked): the
/// stream ends with `-32603` naming the DELETE, not a bare end of stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_answers_a_request_that_is_streaming() {
    let shim = HttpShim::spawn(&[], &modern_reference());
    let c = client();
    let url = shim.url.as_str();
    let (sid, _) = initialize(&c, url, None).await;
    let task = multi_input_task(&c, url, &sid).await;
    let (mut waiting, _) = waiting_with_question(&c, url, &sid, &task).await;
    let deleted = c
        .delete(url)
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", LEGACY)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::OK);
    // (The task's second question may come first.)
    let answer = loop {
        let m = next_valid(&mut waiting, "tasks/result")
            .await
            .expect("an answer before the stream ends");
        if m.get("method").is_none() {
            break m;
        }
    };
    assert_valid(Revision::Legacy, &answer, Some("tasks/result"));
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("deleted")),
        "{answer}"
    );
}

/// The client closes a plain call's stream after its question, posts a
/// new request under the same id (which is answered), then answers the
/// question: the first call's answer has nowhere to go, and must not
/// appear on the session's GET stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_whose_stream_closed_stays_off_the_get_stream() {
    let shim = HttpShim::spawn(&[], &modern_reference());
    let c = client();
    let url = shim.url.as_str();
    let (sid, _) = initialize(&c, url, None).await;
    let get = c
        .get(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", LEGACY)
        .send()
        .await
        .unwrap();
    let mut get = Sse::new(get);
    let asking = rpc(
        7,
        "tools/call",
        plain("confirm_delete", json!({"filename": "c.txt"})),
    );
    let mut call = stream(&c, url, &sid, &asking).await;
    let question = next_valid(&mut call, "tools/call")
        .await
        .expect("a question");
    assert_eq!(question["method"], "elicitation/create", "{question}");
    drop(call);
    let again = rpc(7, "tools/call", plain("greet", json!({"name": "again"})));
    let (s, retried, _) = send(legacy(&c, url, Some(&sid), &again)).await;
    assert_eq!(s, StatusCode::OK);
    assert_valid(Revision::Legacy, &retried, Some("tools/call"));
    assert!(retried["result"].is_object(), "{retried}");
    confirm(&c, url, &sid, &question).await;
    // Anything the GET stream carries in the next two seconds: no answers.
    let mut carried = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while let Some(m) = next_valid(&mut get, "tools/call").await {
            carried.push(m);
        }
    })
    .await;
    assert!(
        carried.iter().all(|m| m.get("method").is_some()),
        "an answer on the GET stream: {carried:#?}"
    );
}

/// The client closes a `tasks/result` stream after the first of two
/// questions, answers it, and waits again: the second question, written
/// to the closed stream, comes again on the new one, and the task ends
/// (it waited for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn questions_lost_with_a_closed_stream_come_again() {
    // What the shim sends upstream shows when the answer has gone on.
    let sent = support::wire::temp_path("closed-stream-upstream.jsonl");
    let shim = HttpShim::spawn(
        &["--record-upstream", sent.to_str().unwrap()],
        &modern_reference(),
    );
    let c = client();
    let url = shim.url.as_str();
    let (sid, _) = initialize(&c, url, None).await;
    let task = multi_input_task(&c, url, &sid).await;
    let (first, q1) = waiting_with_question(&c, url, &sid, &task).await;
    drop(first);
    let answer = |q: &Value| {
        let content = if q["params"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("name")
        {
            json!({"name": "Ada"})
        } else {
            json!({"confirm": true})
        };
        json!({"jsonrpc": "2.0", "id": q["id"], "result": {"action": "accept", "content": content}})
    };
    let (s, _, _) = send(legacy(&c, url, Some(&sid), &answer(&q1))).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    // The answer must have reached the child server before the next wait.
    support::poll::until_async("the answer sent upstream", Duration::from_secs(10), || {
        let sent = sent.clone();
        async move { (updates_sent(&sent) > 0).then_some(()) }
    })
    .await;
    // Again: every question not yet answered comes on the new stream.
    let mut again = stream(
        &c,
        url,
        &sid,
        &rpc(3, "tasks/result", json!({"taskId": task})),
    )
    .await;
    let result = loop {
        let m = next_valid(&mut again, "tasks/result")
            .await
            .expect("the task ends");
        if m.get("method").is_some() {
            assert_ne!(m["id"], q1["id"], "an answered question came again: {m}");
            let (s, _, _) = send(legacy(&c, url, Some(&sid), &answer(&m))).await;
            assert_eq!(s, StatusCode::ACCEPTED);
            continue;
        }
        break m;
    };
    assert_valid(Revision::Legacy, &result, Some("tasks/result"));
    assert!(result["result"]["content"].is_array(), "{result}");
    let _ = std::fs::remove_file(&sent);
}

/// A client that takes JSON only and has no GET stream cannot be asked
/// anything during a plain call. The question used to wait in the
/// session's backlog for a stream that never came, and the call with it,
/// until `--request-timeout`. It is refused at once instead: the call
/// ends with the upstream's outcome of an unanswered question, in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_no_stream_can_carry_is_refused_at_once() {
    let shim = HttpShim::spawn(&["--request-timeout", "60s"], &modern_reference());
    let c = client();
    let url = shim.url.as_str();
    let (sid, _) = initialize(&c, url, None).await;
    let asking = rpc(
        1,
        "tools/call",
        plain("confirm_delete", json!({"filename": "a.txt"})),
    );
    let req = support::http::set_header(
        legacy(&c, url, Some(&sid), &asking),
        "accept",
        Some("application/json"),
    );
    let started = std::time::Instant::now();
    let resp = tokio::time::timeout(Duration::from_secs(20), req.send())
        .await
        .expect("the call is answered long before the request timeout")
        .unwrap();
    assert!(!support::http::is_sse(resp.headers()));
    let answer = resp.json::<Value>().await.unwrap();
    assert_valid(Revision::Legacy, &answer, Some("tools/call"));
    assert_eq!(answer["id"], 1, "{answer}");
    assert!(started.elapsed() < Duration::from_secs(20));
    // Whatever the upstream made of the refusal, the session still works.
    let (s, pong, _) = send(legacy(&c, url, Some(&sid), &rpc(2, "ping", json!({})))).await;
    assert_eq!(s, StatusCode::OK, "{pong}");
}

/// A question asked during a plain call, before the server made a task
/// (an MRTR round) or by the task the shim drives for the call, is
/// withdrawn on that call's stream when the client cancels the call:
/// `notifications/cancelled` naming the question, and then the stream
/// ends with no answer to the call. (The driven task's withdrawal used to
/// wait for the task to read cancelled, after the stream had ended.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_withdraws_its_question_on_its_stream() {
    let shim = HttpShim::spawn(&[], &modern_reference());
    let c = client();
    let url = shim.url.as_str();
    let (sid, _) = initialize(&c, url, None).await;
    // Asked before the server made a task (an MRTR round), and asked by a
    // task the shim drives for the plain call.
    let calls = [
        plain("test_tool_with_task", json!({})),
        plain("confirm_delete", json!({"filename": "d.txt"})),
    ];
    for (n, params) in calls.into_iter().enumerate() {
        let id = 7 + n as i64;
        let mut s = stream(&c, url, &sid, &rpc(id, "tools/call", params)).await;
        let question =
            tokio::time::timeout(Duration::from_secs(10), next_valid(&mut s, "tools/call"))
                .await
                .expect("no question within 10 s")
                .expect("a question on the call's stream");
        assert_eq!(question["method"], "elicitation/create", "{question}");
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "no longer needed"}});
        let (status, _, _) = send(legacy(&c, url, Some(&sid), &cancel)).await;
        assert_eq!(status, StatusCode::ACCEPTED);
        let mut rest = Vec::new();
        let read = async {
            while let Some(m) = next_valid(&mut s, "tools/call").await {
                rest.push(m);
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .expect("the cancelled call's stream did not end");
        assert!(
            rest.iter().any(|m| m["method"] == "notifications/cancelled"
                && m["params"]["requestId"] == question["id"]),
            "call {n}: the question was not withdrawn: {rest:#?}"
        );
        assert!(
            rest.iter().all(|m| m.get("id") != Some(&json!(id))),
            "call {n}: a cancelled request was answered: {rest:#?}"
        );
    }
}

/// A task's question still open when the client cancels the task is
/// withdrawn on the `tasks/result` stream that carried it, before that
/// stream ends with the task's outcome, and a later `tasks/result` does
/// not ask it again: before, the new stream replayed it ahead of the
/// task's outcome, and the withdrawal raced the outcome (a review saw it
/// missing in 12 of 20 runs). No GET stream; ten tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_tasks_question_is_withdrawn_not_asked_again() {
    let shim = HttpShim::spawn(&[], &modern_reference());
    let c = client();
    let url = shim.url.as_str();
    let (sid, _) = initialize(&c, url, None).await;
    for n in 0..10 {
        let mut call = plain("confirm_delete", json!({"filename": format!("i{n}.txt")}));
        call["task"] = json!({"ttl": 60000});
        let (_, created, _) = send(legacy(&c, url, Some(&sid), &rpc(1, "tools/call", call))).await;
        let task = created["result"]["task"]["taskId"]
            .as_str()
            .expect("a task")
            .to_owned();
        let (mut wait, question) = waiting_with_question(&c, url, &sid, &task).await;
        let (s, cancelled, _) = send(legacy(
            &c,
            url,
            Some(&sid),
            &rpc(3, "tasks/cancel", json!({"taskId": task})),
        ))
        .await;
        assert_eq!(s, StatusCode::OK);
        assert_valid(Revision::Legacy, &cancelled, Some("tasks/cancel"));
        let mut rest = Vec::new();
        let on_wait = async {
            while let Some(m) = next_valid(&mut wait, "tasks/result").await {
                rest.push(m);
            }
        };
        tokio::time::timeout(Duration::from_secs(10), on_wait)
            .await
            .expect("the waiting stream did not end");
        let withdrawal = rest.iter().position(|m| {
            m["method"] == "notifications/cancelled" && m["params"]["requestId"] == question["id"]
        });
        let outcome = rest.iter().position(|m| m["id"] == 2);
        assert!(
            withdrawal.is_some() && withdrawal < outcome,
            "task {n}: no withdrawal before the outcome: {rest:#?}"
        );
        let again = legacy(
            &c,
            url,
            Some(&sid),
            &rpc(4, "tasks/result", json!({"taskId": task})),
        )
        .send()
        .await
        .unwrap();
        let on_again = messages_of(again, "tasks/result").await;
        assert!(
            on_again.iter().all(|m| m["method"] != "elicitation/create"),
            "task {n}: a withdrawn question was asked again: {on_again:#?}"
        );
    }
}

/// The same for a task: a client that takes JSON only and has no GET
/// stream waits on a task that asks a question with `tasks/result`. The
/// question went to the backlog of a GET stream that never came, and the
/// `tasks/result` waited until the task's ttl. It is refused for the
/// client instead (the question, whether asked before or during the
/// wait), and the wait ends with the task's outcome, in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_question_no_stream_can_carry_is_refused() {
    let shim = HttpShim::spawn(&["--request-timeout", "60s"], &modern_reference());
    let c = client();
    let url = shim.url.as_str();
    for (n, early) in [(1, false), (2, true)] {
        let (sid, _) = initialize(&c, url, None).await;
        let json_only = |body: &Value| {
            support::http::set_header(
                legacy(&c, url, Some(&sid), body),
                "accept",
                Some("application/json"),
            )
        };
        let mut call = plain("confirm_delete", json!({"filename": "j.txt"}));
        call["task"] = json!({"ttl": 60000});
        let (_, created, _) = send(json_only(&rpc(1, "tools/call", call))).await;
        let task = created["result"]["task"]["taskId"]
            .as_str()
            .expect("a task")
            .to_owned();
        if early {
            // The question is asked (and waits for a stream) before the
            // client waits on the task.
            let (task, json_only) = (task.as_str(), &json_only);
            support::poll::until_async("input_required", Duration::from_secs(10), || async move {
                let (_, got, _) =
                    send(json_only(&rpc(2, "tasks/get", json!({"taskId": task})))).await;
                (got["result"]["status"] == "input_required").then_some(())
            })
            .await;
        }
        let wait = json_only(&rpc(3, "tasks/result", json!({"taskId": task})));
        let resp = tokio::time::timeout(Duration::from_secs(20), wait.send())
            .await
            .unwrap_or_else(|_| panic!("round {n}: tasks/result still waiting after 20 s"))
            .unwrap();
        assert!(!support::http::is_sse(resp.headers()));
        let answer = resp.json::<Value>().await.unwrap();
        assert_valid(Revision::Legacy, &answer, Some("tasks/result"));
        assert_eq!(answer["id"], 3, "round {n}: {answer}");
        let t = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(t.contains("j.txt"), "round {n}: {answer}");
    }
}

/// How many `tasks/update` requests an upstream recording holds (0 before
/// the file exists).
fn updates_sent(recording: &std::path::Path) -> usize {
    std::fs::read_to_string(recording)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["dir"] == "c2s" && r["msg"]["method"] == "tasks/update")
        .count()
}
