/// The inbox page at `/`: static HTML, CSS and plain JavaScript compiled into the binary, a
/// demo and an operator's tool — sign in with a user id and token, see the inbox as an app
/// would show it (title, body, thumbnail, buttons, unread dots, the modal to present now) and
/// watch new pushes arrive over the event stream. No dependencies, no build step.
///
/// A tap on an item opens it (`POST /v1/inbox/{item}/open`: read, and the push-open reports);
/// "Mark read" only marks it read, "Mark unread" undoes that; "Pin" keeps it first in the list
/// ("Unpin" undoes it); "Snooze" hides it for an hour (`POST /v1/inbox/{item}/snooze` with
/// `{"until": …}`); "Delete" removes it for good (`DELETE /v1/inbox/{item}`). The action the
/// item keeps (`state.acted`) is marked on its button, and "Undo" reverts it
/// (`POST /v1/inbox/{item}/actions/{action}/revert`). The modal to present is reported shown
/// (`POST /v1/inapp/{item}/shown`) as it appears, so it is not presented again. Its buttons
/// are the ones `GET /v1/inapp` serves (`inAppActions`, titled in the browser's language):
/// Cancel and Open, or the push's category actions; each calls the route it names (Cancel
/// repeats the shown report under the same Idempotency-Key, so it is journaled once).
///
/// When the configuration has feeds (`[Feed NAME]`), they are tabs above the list ("All" and
/// one per feed, each with its unread count from `GET /v1/inbox/counts`); a tab lists that
/// feed (`?feed=NAME`) and "Read all" then reads only that feed.
///
/// `#user=ID&token=T` in the address signs in at once (for bookmarks and the browser test);
/// `&click=open:ITEM,read:ITEM,modal:ACTION,tab:NAME` then taps that item, clicks its "Mark read"
/// button (`unread:`, `pin:`, `unpin:`, `snooze:`, `delete:`, `revert:` its other buttons,
/// `action:ITEM:ACTION` its action ACTION), the modal's button
/// with that action id (`mm_open`, `mm_cancel`), or the tab of feed NAME (`tab:` for "All"),
/// once the list is shown;
/// `&live=0` leaves the event stream closed (a headless browser's virtual-time budget never
/// runs out while a request stays open).
enum InboxPage {
    static func response() -> HTTPResponse {
        HTTPResponse(status: 200, headers: [
            ("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store"),
            ("Content-Security-Policy", "default-src 'self'; img-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'"),
            ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"),
        ], body: .bytes(Array(html.utf8)))
    }

    static let html = #"""
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>pushspool inbox</title>
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <style>
        [hidden] { display: none !important; }
        body { font: 15px/1.4 system-ui, sans-serif; margin: 0; background: #f3f4f6; color: #111; }
        header { background: #1f2937; color: #fff; padding: 10px 16px; display: flex; gap: 12px; align-items: center; }
        header h1 { font-size: 17px; margin: 0; flex: 1; }
        #counts { font-size: 13px; opacity: .85; }
        main { max-width: 640px; margin: 16px auto; padding: 0 12px; }
        form#signin { background: #fff; padding: 16px; border-radius: 8px; display: grid; gap: 8px; }
        form#signin input { padding: 6px; font: inherit; }
        ul#items { list-style: none; padding: 0; margin: 0; display: grid; gap: 8px; }
        li.item { background: #fff; border-radius: 8px; padding: 10px 12px; display: grid; grid-template-columns: 14px 1fr 72px; gap: 8px; }
        li.item .dot { width: 10px; height: 10px; border-radius: 50%; margin-top: 6px; }
        li.item.unread .dot { background: #2563eb; }
        li.item.pinned { outline: 2px solid #f59e0b; }
        li.item .content { cursor: pointer; }
        li.item .title { font-weight: 600; }
        li.item .subtitle { color: #374151; }
        li.item .body { color: #4b5563; white-space: pre-wrap; }
        li.item .meta { font-size: 12px; color: #6b7280; }
        li.item img.thumb { width: 72px; height: 72px; object-fit: cover; border-radius: 6px; }
        li.item .buttons { display: flex; gap: 6px; flex-wrap: wrap; margin-top: 6px; }
        li.item button.action.acted { background: #dbeafe; border-color: #2563eb; }
        button { font: inherit; font-size: 13px; padding: 3px 8px; border-radius: 6px; border: 1px solid #9ca3af; background: #fff; cursor: pointer; }
        #modal { position: fixed; inset: 0; background: rgba(0,0,0,.45); display: none; align-items: center; justify-content: center; }
        #modal.open { display: flex; }
        #modal .card { background: #fff; border-radius: 10px; padding: 18px; max-width: 360px; }
        #modal .title { font-weight: 600; }
        #error { color: #b91c1c; }
        nav#tabs { display: flex; gap: 6px; flex-wrap: wrap; margin-bottom: 10px; }
        nav#tabs button.active { background: #1f2937; color: #fff; border-color: #1f2937; }
        </style></head>
        <body>
        <header><h1>pushspool inbox</h1><span id="who"></span><span id="counts"></span><button id="readall" hidden>Read all</button></header>
        <main>
          <p id="error" role="alert"></p>
          <form id="signin"><label>User id <input id="user" autocomplete="username" required></label>
            <label>Token <input id="token" autocomplete="current-password" required></label>
            <button type="submit">Sign in</button></form>
          <nav id="tabs" role="tablist" hidden></nav>
          <ul id="items" aria-live="polite"></ul>
          <p><button id="more" hidden>More</button></p>
        </main>
        <div id="modal" role="dialog" aria-modal="true"><div class="card"><div class="title" id="modal-title"></div>
          <p id="modal-body"></p><div class="buttons" id="modal-buttons"></div></div></div>
        <script>
        "use strict";
        let user = "", token = "", cursor = null, source = null, feed = "", lastCounts = null;
        const $ = (id) => document.getElementById(id);
        const q = () => "user=" + encodeURIComponent(user) + "&token=" + encodeURIComponent(token);
        async function api(method, path, body, key) {
          const headers = { "Authorization": "Bearer " + token, "X-Pushspool-User": user };
          if (key) headers["Idempotency-Key"] = key;
          if (body !== undefined) headers["Content-Type"] = "application/json";
          const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
          const json = await response.json().catch(() => ({}));
          if (!response.ok) throw new Error(json.message || ("HTTP " + response.status));
          return json;
        }
        function el(tag, cls, text) { const e = document.createElement(tag); if (cls) e.className = cls; if (text != null) e.textContent = text; return e; }
        function render(item) {
          // An in-app-only MODAL (ListModals=no): its state changes, but it is not in the list.
          if (item.listed === false) return;
          let li = document.querySelector('li.item[data-item="' + item.item + '"]');
          // A deleted item is only {"item", "deleted": true}.
          if (item.deleted) { if (li) li.remove(); return; }
          const fresh = !li;
          if (fresh) li = el("li", "item");
          li.replaceChildren();
          li.dataset.item = item.item;
          li.classList.toggle("unread", !item.state.read);
          li.classList.toggle("read", item.state.read);
          li.classList.toggle("pinned", !!item.state.pinned);
          li.append(el("span", "dot"));
          const text = el("div", "content");
          // A tap on the item (not on one of its buttons) opens it.
          text.addEventListener("click", (e) => { if (!e.target.closest("button")) mark(item.item, "open"); });
          // A localised push names the app's strings; with none to look them up in, the key
          // is shown, as the vendors' SDKs do when a key has no translation.
          text.append(el("div", "title", item.title || item.titleLocKey || "(no title)"));
          if (item.subtitle) text.append(el("div", "subtitle", item.subtitle));
          if (item.body || item.locKey) text.append(el("div", "body", item.body || item.locKey));
          text.append(el("div", "meta", item.vendor + " · " + new Date(item.ingestedAt).toLocaleString() + (item.category ? " · " + item.category : "")));
          const buttons = el("div", "buttons");
          const actions = (item.actions && item.actions.length ? item.actions : item.buttons) || [];
          // The action the item keeps (state.acted: its id, or false) is marked on its button.
          const acted = typeof item.state.acted === "string" ? item.state.acted : null;
          for (const action of actions.slice(0, 4)) {
            const b = el("button", "action" + (acted && action.id === acted ? " acted" : ""), action.title || action.text || action.id);
            b.dataset.action = action.id || "";
            b.addEventListener("click", () => act(item, action));
            buttons.append(b);
          }
          const button = (what, title) => {
            const b = el("button", "mark-" + what, title);
            b.addEventListener("click", () => mark(item.item, what));
            buttons.append(b);
          };
          if (item.state.read) button("unread", "Mark unread"); else button("read", "Mark read");
          if (item.state.pinned) button("unpin", "Unpin"); else button("pin", "Pin");
          if (acted) {
            const chosen = actions.find((a) => a.id === acted);
            const undo = el("button", "mark-revert", "Undo " + (chosen ? chosen.title || chosen.text || acted : acted));
            undo.dataset.action = acted;
            undo.addEventListener("click", () => revert(item.item, acted));
            buttons.append(undo);
          }
          button("snooze", "Snooze 1 h");
          const archive = el("button", "archive", "Archive");
          archive.addEventListener("click", () => mark(item.item, "archive"));
          buttons.append(archive);
          button("delete", "Delete");
          text.append(buttons);
          li.append(text);
          if (item.media && item.media.thumbnailUrl) {
            const img = el("img", "thumb"); img.alt = ""; img.src = item.media.thumbnailUrl + "?" + q(); li.append(img);
          } else li.append(el("span"));
          if (item.state.archived) { li.remove(); return; }
          // Pinned items first, each part newest first, as the server lists them; a pin or
          // an unpin moves the item.
          const rank = (c) => [c.classList.contains("pinned") ? 1 : 0, Number(c.dataset.item)];
          const mine = rank(li);
          const list = $("items");
          const after = [...list.children].find((c) => {
            if (c === li) return false;
            const other = rank(c);
            return other[0] < mine[0] || (other[0] === mine[0] && other[1] < mine[1]);
          });
          if (fresh || li.nextElementSibling !== (after || null)) list.insertBefore(li, after || null);
        }
        async function mark(id, what) {
          try {
            if (what === "snooze") {
              // Hidden until then; it comes back unread (the stream says so).
              await api("POST", "/v1/inbox/" + id + "/snooze", { until: new Date(Date.now() + 3600e3).toISOString() });
              const li = document.querySelector('li.item[data-item="' + id + '"]');
              if (li) li.remove();
              return;
            }
            const r = what === "delete" ? await api("DELETE", "/v1/inbox/" + id) : await api("POST", "/v1/inbox/" + id + "/" + what);
            render(r.item);
          } catch (e) { $("error").textContent = e.message; }
        }
        async function revert(id, action) {
          try { const r = await api("POST", "/v1/inbox/" + id + "/actions/" + encodeURIComponent(action) + "/revert"); render(r.item); }
          catch (e) { $("error").textContent = e.message; }
        }
        async function act(item, action) {
          let body = {};
          if (action.textInput) { const t = prompt(action.textInput.placeholder || "Reply"); if (t == null) return; body = { text: t }; }
          try { const r = await api("POST", "/v1/inbox/" + item.item + "/actions/" + encodeURIComponent(action.id), body); render(r.item); } catch (e) { $("error").textContent = e.message; }
        }
        // An answer's item, on the list only when it is listed there (a modal may not be).
        function refresh(item) { if (document.querySelector('li.item[data-item="' + item.item + '"]')) render(item); }
        // The counts, and the feeds' tabs when there are feeds: "All" and one per feed, each
        // with its unread count; the selected one is marked active.
        function counts(c) {
          $("counts").textContent = c.unread + " unread · " + c.unseen + " unseen"; $("counts").dataset.unread = c.unread;
          if (!c.feeds) return;
          lastCounts = c;
          const tabs = $("tabs"); tabs.replaceChildren(); tabs.hidden = false;
          for (const name of ["", ...Object.keys(c.feeds)]) {
            const unread = name ? c.feeds[name].unread : c.unread;
            const b = el("button", "tab" + (name === feed ? " active" : ""), (name || "All") + " (" + unread + ")");
            b.setAttribute("role", "tab"); b.dataset.feed = name; b.dataset.unread = unread;
            b.addEventListener("click", () => selectFeed(name).catch((e) => { $("error").textContent = e.message; }));
            tabs.append(b);
          }
        }
        async function selectFeed(name) {
          feed = name; cursor = null; $("items").replaceChildren();
          if (lastCounts) counts(lastCounts);
          await page();
        }
        // A new item or a bulk change: the first page again (a feed's list cannot tell from an
        // item alone whether it belongs to the feed).
        function reload() { $("items").replaceChildren(); cursor = null; page().catch(() => {}); }
        async function page() {
          const r = await api("GET", "/v1/inbox?limit=20" + (feed ? "&feed=" + encodeURIComponent(feed) : "")
            + (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
          r.items.forEach(render);
          cursor = r.nextCursor;
          $("more").hidden = !cursor;
        }
        async function inapp() {
          const r = await api("GET", "/v1/inapp");
          if (!r.item) return;
          $("modal-title").textContent = r.item.title || "";
          $("modal-body").textContent = r.item.body || "";
          const buttons = $("modal-buttons"); buttons.replaceChildren();
          // One key for the shown report, on presentation and on Cancel: journaled once.
          const shownKey = "inapp-shown-" + r.item.item;
          for (const action of r.item.inAppActions || []) {
            const b = el("button", "modal-action", action.title);
            b.dataset.action = action.id;
            b.addEventListener("click", async () => {
              $("modal").classList.remove("open");
              try {
                const answer = await api("POST", action.path, undefined, action.event === "nc.inapp-shown" ? shownKey : undefined);
                if (answer.item) refresh(answer.item);
              } catch (e) { $("error").textContent = e.message; }
            });
            buttons.append(b);
          }
          $("modal").classList.add("open");
          // Presented: GET /v1/inapp does not serve it again.
          await api("POST", "/v1/inapp/" + r.item.item + "/shown", undefined, shownKey);
        }
        function live() {
          if (source) source.close();
          source = new EventSource("/v1/inbox/stream?" + q());
          source.addEventListener("item", (e) => { if (feed) reload(); else render(JSON.parse(e.data)); });
          source.addEventListener("inapp", () => inapp().catch(() => {}));
          // In a feed's tab only the items it lists change there (an unarchived one is refetched).
          source.addEventListener("state", (e) => { const item = JSON.parse(e.data); if (!feed) render(item); else if (!item.deleted && !item.state.archived && !document.querySelector('li.item[data-item="' + item.item + '"]')) reload(); else render(item); });
          source.addEventListener("refresh", reload);
          source.addEventListener("counts", (e) => counts(JSON.parse(e.data)));
        }
        async function signIn(u, t, click, noLive) {
          user = u; token = t; cursor = null; $("items").replaceChildren(); $("error").textContent = "";
          try {
            counts(await api("GET", "/v1/inbox/counts"));
            $("signin").hidden = true; $("who").textContent = user; $("readall").hidden = false;
            await page();
            await inapp();
            if (!noLive) live();
            document.body.dataset.ready = "1";
            for (const step of (click || "").split(",").filter((s) => s)) {
              const [what, id, action] = step.split(":");
              if (what === "tab") { await selectFeed(id || ""); continue; }
              const target = what === "modal" ? document.querySelector('#modal-buttons button[data-action="' + id + '"]')
                : document.querySelector('li.item[data-item="' + id + '"] ' + (what === "open" ? ".content .title"
                  : what === "action" ? 'button.action[data-action="' + action + '"]' : "button.mark-" + what));
              if (target) target.click();
            }
          } catch (e) { $("error").textContent = e.message; }
        }
        $("signin").addEventListener("submit", (e) => { e.preventDefault(); signIn($("user").value, $("token").value); });
        $("more").addEventListener("click", () => page().catch((e) => { $("error").textContent = e.message; }));
        $("readall").addEventListener("click", async () => {
          try {
            const r = await api("POST", "/v1/inbox/read-all" + (feed ? "?feed=" + encodeURIComponent(feed) : ""));
            if (!feed) counts(r.counts);
            document.querySelectorAll("li.item.unread").forEach((li) => { li.classList.remove("unread"); li.classList.add("read"); });
          } catch (e) { $("error").textContent = e.message; }
        });
        const hash = new URLSearchParams(location.hash.slice(1));
        if (hash.get("user") && hash.get("token")) signIn(hash.get("user"), hash.get("token"), hash.get("click"), hash.get("live") === "0");
        </script></body></html>
        """#
}
