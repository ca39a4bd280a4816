//! The stored layout of a task: three lines (head, snapshot, record), and
//! the two layouts written before it (head with the snapshot inside, then
//! the record; the record alone), all read the same.

use mcp_tasks_edge::block_on;
use mcp_tasks_edge::store::Store;
use mcp_tasks_edge::tasks::finished_until;
use serde_json::{Value, json};

use crate::support::{Harness, standard_headers};

fn body(h: &Harness, id: &str) -> (u64, String) {
    let e = block_on(h.store.get(id)).unwrap().unwrap();
    (e.version, e.body)
}

fn rewrite(h: &Harness, id: &str, new_body: &str) {
    let e = block_on(h.store.get(id)).unwrap().unwrap();
    block_on(h.store.put(id, Some(e.version), new_body, e.due_at)).unwrap();
}

/// The two earlier layouts of a three-line body, byte for byte as they
/// were written (the snapshot was the head's last member).
fn earlier_layouts(body: &str) -> (String, String) {
    let lines: Vec<&str> = body.split('\n').collect();
    assert_eq!(lines.len(), 3, "{body}");
    let head = lines[0].strip_suffix('}').unwrap();
    (
        format!("{head},\"snapshot\":{}}}\n{}", lines[1], lines[2]),
        lines[2].to_owned(),
    )
}

/// The raw bytes of a `tasks/get` response, request id fixed.
fn get_bytes(h: &Harness, id: &str) -> Vec<u8> {
    let mut params = json!({"taskId": id});
    params["_meta"] = crate::support::meta(crate::support::caps());
    let msg = json!({"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": params});
    let hs = standard_headers(&msg);
    let refs: Vec<(&str, &str)> = hs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let r = h.post_raw(&refs, &serde_json::to_vec(&msg).unwrap());
    assert_eq!(r.status, 200);
    r.body_bytes().to_vec()
}

#[test]
fn a_task_is_stored_as_head_snapshot_and_record() {
    let h = Harness::new();
    let id = h.start("slow_compute", json!({"seconds": 60}));
    let (_, stored) = body(&h, &id);
    let lines: Vec<&str> = stored.split('\n').collect();
    assert_eq!(lines.len(), 3, "{stored}");
    let head: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(head["status"], "working");
    assert_eq!(
        head["owner"],
        json!({"tenant": "acme", "principal": "alice"})
    );
    assert!(
        head.get("snapshot").is_none(),
        "the snapshot has its own line"
    );
    let snapshot: Value = serde_json::from_str(lines[1]).unwrap();
    assert_eq!(snapshot["taskId"], id.as_str());
    let record: Value = serde_json::from_str(lines[2]).unwrap();
    assert_eq!(record["id"], id.as_str());
    // tasks/get serves the snapshot line as it is.
    let got = h.get(&id);
    for (k, v) in snapshot.as_object().unwrap() {
        assert_eq!(&got[k], v, "{k}");
    }
}

#[test]
fn records_in_the_earlier_layouts_read_the_same_and_are_rewritten_on_the_next_write() {
    let h = Harness::new();
    let id = h.start("slow_compute", json!({"seconds": 1}));
    let (_, stored) = body(&h, &id);
    let expected = get_bytes(&h, &id);
    let (two_lines, record_only) = earlier_layouts(&stored);
    for (layout, old) in [
        ("head with snapshot", &two_lines),
        ("record only", &record_only),
    ] {
        rewrite(&h, &id, old);
        assert_eq!(
            String::from_utf8(get_bytes(&h, &id)).unwrap(),
            String::from_utf8(expected.clone()).unwrap(),
            "{layout}"
        );
        assert_eq!(finished_until(&id, old), None, "{layout}: working");
    }
    // The next write (the step that finishes the task) stores three lines.
    rewrite(&h, &id, &two_lines);
    let done = h.run_until_settled(&id, 1_000, 3);
    assert_eq!(done["status"], "completed");
    let (_, after) = body(&h, &id);
    assert_eq!(after.split('\n').count(), 3, "{after}");
    let expiry = finished_until(&id, &after).expect("a finished task");
    let (two, one) = earlier_layouts(&after);
    assert_eq!(finished_until(&id, &two), Some(expiry));
    assert_eq!(finished_until(&id, &one), Some(expiry));
    assert_eq!(finished_until("tsk_someOtherIdAAAAAAAAAAA", &after), None);
}

#[test]
fn a_snapshot_line_that_is_not_an_object_is_never_served() {
    let h = Harness::new();
    let id = h.start("slow_compute", json!({"seconds": 60}));
    let expected = h.get(&id);
    let (_, stored) = body(&h, &id);
    let lines: Vec<&str> = stored.split('\n').collect();
    // The record is read (and its snapshot rendered) instead.
    rewrite(
        &h,
        &id,
        &format!("{}\n[\"not\",\"a task\"]\n{}", lines[0], lines[2]),
    );
    assert_eq!(h.get(&id), expected);
}
