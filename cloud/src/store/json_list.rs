//! A list as one JSON array parameter instead of one parameter per item: the
//! statement's text is the same whatever the list's length, so each connection
//! prepares it once, and no list meets a backend's limit on parameters.

use serde::Serialize;

use super::Backend;

/// The integers of the JSON array parameter `$p` (`[1, 2, 3]`), as a subquery of one
/// column, in one dialect (`sqlite`, `postgres`).
macro_rules! json_ids {
    (sqlite, $p:literal) => {
        concat!("SELECT value FROM json_each(", $p, ")")
    };
    (postgres, $p:literal) => {
        concat!(
            "SELECT CAST(value AS BIGINT) FROM json_array_elements_text(CAST(",
            $p,
            " AS JSON))"
        )
    };
}
pub(super) use json_ids;

/// The strings of the JSON array parameter `$p` (`["a", "b"]`), as a subquery of one
/// column, as [`json_ids`] gives them.
macro_rules! json_texts {
    (sqlite, $p:literal) => {
        concat!("SELECT value FROM json_each(", $p, ")")
    };
    (postgres, $p:literal) => {
        concat!(
            "SELECT value FROM json_array_elements_text(CAST(",
            $p,
            " AS JSON))"
        )
    };
}
pub(super) use json_texts;

/// The condition "`$column` is in the JSON array parameter `$p`", its list read by `$list`
/// ([`json_ids`] or [`json_texts`]). On PostgreSQL it is `= ANY(ARRAY(…))`: the planner takes
/// such an array for about ten values and probes the column's index. Written `IN (subquery)`
/// it took the set-returning function for 100 rows and answered each short lookup with a hash
/// over a sequential scan of the whole table (1.6 ms a token lookup among 5,000 tokens, the
/// most expensive statement of the PostgreSQL friends phase).
macro_rules! json_in {
    (sqlite, $list:ident, $column:literal, $p:literal) => {
        concat!(
            $column,
            " IN (",
            $crate::store::json_list::$list!(sqlite, $p),
            ")"
        )
    };
    (postgres, $list:ident, $column:literal, $p:literal) => {
        concat!(
            $column,
            " = ANY(ARRAY(",
            $crate::store::json_list::$list!(postgres, $p),
            "))"
        )
    };
    ($backend:expr, $list:ident, $column:literal, $p:literal) => {
        match $backend {
            $crate::store::Backend::Sqlite => {
                $crate::store::json_list::json_in!(sqlite, $list, $column, $p)
            }
            $crate::store::Backend::Postgres => {
                $crate::store::json_list::json_in!(postgres, $list, $column, $p)
            }
        }
    };
}
pub(super) use json_in;

/// The rows of the JSON array of integer arrays `$p` (`[[1, 2], [3, 4]]`), as a
/// subquery whose column `columns[i]` is element `i` of each row.
pub(super) fn json_rows(backend: Backend, p: usize, columns: &[&str]) -> String {
    let (element, source) = match backend {
        Backend::Sqlite => ("json_extract(value, '$[{i}]')", format!("json_each(${p})")),
        Backend::Postgres => (
            "CAST(r ->> {i} AS BIGINT)",
            format!("json_array_elements(CAST(${p} AS JSON)) AS t (r)"),
        ),
    };
    let columns: Vec<String> = columns
        .iter()
        .enumerate()
        .map(|(i, name)| format!("{} AS {name}", element.replace("{i}", &i.to_string())))
        .collect();
    format!("SELECT {} FROM {source}", columns.join(", "))
}

/// `items` as the JSON array the subqueries above read (a tuple is an array).
pub(super) fn json_list<T: Serialize>(items: &[T]) -> String {
    serde_json::to_string(items).expect("integers and tuples of them serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_name_each_element() {
        assert_eq!(
            json_rows(Backend::Sqlite, 2, &["a", "b"]),
            "SELECT json_extract(value, '$[0]') AS a, json_extract(value, '$[1]') AS b \
             FROM json_each($2)"
        );
        assert_eq!(
            json_rows(Backend::Postgres, 1, &["a"]),
            "SELECT CAST(r ->> 0 AS BIGINT) AS a \
             FROM json_array_elements(CAST($1 AS JSON)) AS t (r)"
        );
        assert_eq!(json_list(&[(1_i64, 2_i64), (3, 4)]), "[[1,2],[3,4]]");
    }
}
