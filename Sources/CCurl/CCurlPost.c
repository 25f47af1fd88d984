#include "CCurlPost.h"

CURLcode ccurl_post_body(CURL *easy, const char *body, curl_off_t length) {
    CURLcode code = curl_easy_setopt(easy, CURLOPT_POST, 1L);
    if (code != CURLE_OK) return code;
    code = curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, length);
    if (code != CURLE_OK) return code;
    return curl_easy_setopt(easy, CURLOPT_COPYPOSTFIELDS, body);
}

CURLcode ccurl_post_headers(CURL *easy, struct curl_slist *headers) {
    return curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
}
