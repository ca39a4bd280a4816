//! Checks an input response against the request it answers: an
//! `ElicitResult` for `elicitation/create` (with form content that fits the
//! requested schema), a result object for the other request types.

use serde_json::{Map, Value};

use crate::protocol::tools::{ELICITATION_CREATE, ElicitAction, ElicitResult, InputRequest};

/// `Ok` when `response` is an acceptable answer to `request`; otherwise a
/// sentence saying what is wrong.
pub fn validate(request: &InputRequest, response: &Value) -> Result<(), String> {
    if request.method != ELICITATION_CREATE {
        return match response {
            Value::Object(_) => Ok(()),
            _ => Err("the response must be an object".into()),
        };
    }
    let result: ElicitResult = crate::json::from_value_ref(response).map_err(|_| {
        "the response must be an ElicitResult with action accept, decline or cancel".to_string()
    })?;
    if result.action != ElicitAction::Accept {
        return Ok(());
    }
    let is_form = request
        .params
        .get("mode")
        .and_then(Value::as_str)
        .unwrap_or("form")
        == "form";
    if !is_form {
        return Ok(());
    }
    let content = result
        .content
        .as_ref()
        .ok_or_else(|| "an accepted form response needs content".to_string())?;
    let schema = request
        .params
        .get("requestedSchema")
        .unwrap_or(&Value::Null);
    check_form(schema, content)
}

fn check_form(schema: &Value, content: &Map<String, Value>) -> Result<(), String> {
    let empty = Map::new();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for r in required.iter().filter_map(Value::as_str) {
            if !content.contains_key(r) {
                return Err(format!("the required field {r:?} is missing"));
            }
        }
    }
    for (name, value) in content {
        if let Some(prop) = props.get(name) {
            check_field(name, prop, value)?;
        }
    }
    Ok(())
}

/// The values a schema allows, if it lists them: its `enum`, or the
/// `const` of each of its `alternatives` (`oneOf` for a single-select
/// string, `anyOf` for a multi-select's items).
fn allowed<'a>(schema: &'a Value, alternatives: &str) -> Option<Vec<&'a str>> {
    schema
        .get("enum")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .or_else(|| {
            schema.get(alternatives).and_then(Value::as_array).map(|a| {
                a.iter()
                    .filter_map(|o| o.get("const").and_then(Value::as_str))
                    .collect()
            })
        })
}

/// Whether `n` is below the schema's `min` or above its `max`, where set.
fn out_of_bounds(schema: &Value, min: &str, max: &str, n: u64) -> bool {
    schema
        .get(min)
        .and_then(Value::as_u64)
        .is_some_and(|m| n < m)
        || schema
            .get(max)
            .and_then(Value::as_u64)
            .is_some_and(|m| n > m)
}

fn check_field(name: &str, prop: &Value, value: &Value) -> Result<(), String> {
    let ty = prop.get("type").and_then(Value::as_str).unwrap_or("");
    let wrong = || format!("the field {name:?} must be of type {ty}");
    match ty {
        "string" => {
            let s = value.as_str().ok_or_else(wrong)?;
            if allowed(prop, "oneOf").is_some_and(|a| !a.contains(&s)) {
                return Err(format!(
                    "the field {name:?} is not one of the allowed values"
                ));
            }
            if out_of_bounds(prop, "minLength", "maxLength", s.chars().count() as u64) {
                return Err(format!("the field {name:?} has the wrong length"));
            }
            Ok(())
        }
        "number" | "integer" => {
            let n = value.as_f64().ok_or_else(wrong)?;
            // `2.0` is refused, although JSON Schema counts it an integer:
            // a tool reading the field as one (with serde) could not.
            if ty == "integer" && !(value.is_i64() || value.is_u64()) {
                return Err(wrong());
            }
            if prop
                .get("minimum")
                .and_then(Value::as_f64)
                .is_some_and(|m| n < m)
                || prop
                    .get("maximum")
                    .and_then(Value::as_f64)
                    .is_some_and(|m| n > m)
            {
                return Err(format!("the field {name:?} is out of range"));
            }
            Ok(())
        }
        "boolean" => value.as_bool().map(|_| ()).ok_or_else(wrong),
        "array" => {
            // A multi-select: strings, each one of the allowed values, and
            // as many as `minItems` and `maxItems` allow.
            let items = value.as_array().ok_or_else(wrong)?;
            let choices = prop.get("items").and_then(|i| allowed(i, "anyOf"));
            for item in items {
                let s = item.as_str().ok_or_else(wrong)?;
                if choices.as_ref().is_some_and(|a| !a.contains(&s)) {
                    return Err(format!(
                        "the field {name:?} holds a value that is not allowed"
                    ));
                }
            }
            if out_of_bounds(prop, "minItems", "maxItems", items.len() as u64) {
                return Err(format!("the field {name:?} has the wrong number of values"));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req() -> InputRequest {
        InputRequest::elicit_form(
            "?",
            json!({
                "type": "object",
                "properties": {
                    "approved": {"type": "boolean"},
                    "size": {"type": "string", "enum": ["s", "m"]},
                    "n": {"type": "integer", "minimum": 1, "maximum": 3},
                    "tags": {"type": "array", "items": {"type": "string", "enum": ["a"]}},
                    "colours": {"type": "array", "minItems": 1, "maxItems": 2,
                        "items": {"anyOf": [{"const": "red"}, {"const": "blue"}, {"const": "green"}]}}
                },
                "required": ["approved"]
            }),
        )
    }

    #[test]
    fn accepts_good_answers() {
        for ok in [
            json!({"action": "accept", "content": {"approved": true}}),
            json!({"action": "accept", "content": {"approved": false, "size": "m", "n": 2, "tags": ["a"]}}),
            json!({"action": "accept", "content": {"approved": true, "unknown": 1}}),
            json!({"action": "accept", "content": {"approved": true, "tags": [], "colours": ["red", "blue"]}}),
            json!({"action": "decline"}),
            json!({"action": "cancel"}),
        ] {
            assert_eq!(validate(&req(), &ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn rejects_bad_answers() {
        for bad in [
            json!("yes"),
            json!({"action": "maybe"}),
            json!({"action": "accept"}),
            json!({"action": "accept", "content": {}}),
            json!({"action": "accept", "content": {"approved": "yes"}}),
            json!({"action": "accept", "content": {"approved": true, "size": "xl"}}),
            json!({"action": "accept", "content": {"approved": true, "n": 1.5}}),
            json!({"action": "accept", "content": {"approved": true, "n": 9}}),
            json!({"action": "accept", "content": {"approved": true, "tags": [1]}}),
            json!({"action": "accept", "content": {"approved": true, "tags": ["zzz"]}}),
            json!({"action": "accept", "content": {"approved": true, "colours": ["pink"]}}),
            json!({"action": "accept", "content": {"approved": true, "colours": []}}),
            json!({"action": "accept", "content": {"approved": true, "colours": ["red", "blue", "green"]}}),
        ] {
            assert!(validate(&req(), &bad).is_err(), "{bad}");
        }
    }
}
