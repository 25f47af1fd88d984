#ifndef CCURL_POST_H
#define CCURL_POST_H
#include <curl/curl.h>
/* Typed, non-variadic wrappers for the outbox's POSTs (libcurl's setopt is variadic). */

/* Makes the handle send `length` bytes of `body` as a POST. curl copies the bytes
 * (CURLOPT_COPYPOSTFIELDS after CURLOPT_POSTFIELDSIZE_LARGE, in that order, as the libcurl
 * manual requires), so the caller's buffer may go away after the call. */
CURLcode ccurl_post_body(CURL *easy, const char *body, curl_off_t length);

/* CURLOPT_HTTPHEADER: the list stays owned by the caller and must outlive the transfer. */
CURLcode ccurl_post_headers(CURL *easy, struct curl_slist *headers);
#endif
