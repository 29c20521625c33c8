//! The browser pages: plain HTML and JavaScript compiled into the binary,
//! no build step. `/` plays at a table; `/admin` is the operators' view
//! (it calls the admin API with the token the operator enters).

use actix_web::HttpResponse;

const TABLE_PAGE: &str = include_str!("../../static/index.html");
const ADMIN_PAGE: &str = include_str!("../../static/admin.html");

pub async fn table_page() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(TABLE_PAGE)
}

pub async fn admin_page() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(ADMIN_PAGE)
}
