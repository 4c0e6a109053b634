// mining review: keyboard-first grid of queued candidates. All votes live on the server.
// With a personal link the server says who this is (/api/me); without tokens the browser
// keeps the reviewer's name (localStorage).
"use strict";
(() => {
  const PAGE = 100;
  const $ = (id) => document.getElementById(id);
  const st = { name: localStorage.getItem("mining-review-name") || "", landmarks: [], lm: null,
               offset: 0, total: 0, items: [], cursor: 0, show: "all", sort: "rank",
               minInliers: null };

  // The sticky header's real height (it wraps on narrow windows): the cursor's tile scrolls to
  // just below it, never under it.
  const header = document.querySelector("header");
  new ResizeObserver(() => document.documentElement.style.setProperty("--header-h", header.offsetHeight + "px"))
    .observe(header);

  // The token (if any) arrives once in the URL; the server answers with a cookie, so hide it.
  if (new URLSearchParams(location.search).has("token")) history.replaceState(null, "", location.pathname);

  async function api(path, opts = {}) {
    const init = { credentials: "same-origin", ...opts };
    if (opts.body !== undefined) {
      init.method = "POST"; init.headers = { "Content-Type": "application/json" };
      init.body = JSON.stringify(opts.body);
    }
    const r = await fetch(path, init);
    if (!r.ok) {
      let msg = r.statusText;
      try { msg = (await r.json()).detail || msg; } catch (e) { /* not JSON */ }
      throw new Error(`${r.status} ${msg}`);
    }
    return r.json();
  }
  const q = (o) => new URLSearchParams(o).toString();

  function toast(msg) {
    const t = $("toast"); t.textContent = msg; t.classList.add("show");
    clearTimeout(toast.timer); toast.timer = setTimeout(() => t.classList.remove("show"), 4000);
  }

  // ---------------------------------------------------------------- landmarks and progress
  async function loadLandmarks() {
    const data = await api("/api/landmarks?" + q({ reviewer: st.name }));
    st.landmarks = data.landmarks;
    if (data.kind === "audit") {  // mining audit's sample: one question about every landmark
      document.title = "mining audit";
      $("question").textContent = "Audit: does this image show any of these landmarks (any benchmark landmark)?";
      $("other-box").open = true;
    }
    const sel = $("landmark");
    const keep = st.lm;
    sel.innerHTML = "";
    for (const lm of st.landmarks) {
      const o = document.createElement("option");
      o.value = lm.landmark;
      o.textContent = `${lm.landmark}  (${lm.mine}/${lm.total})${lm.mine >= lm.total ? " ✓" : ""}`;
      sel.appendChild(o);
    }
    if (keep) sel.value = keep;
    const pct = data.total ? (100 * data.mine / data.total) : 0;
    $("all-progress").textContent = `all: ${data.mine} / ${data.total} (${pct.toFixed(1)}%)`;
    $("all-bar").style.width = pct + "%";
    showLandmarkProgress();
    showDone();
    return data;
  }

  function showLandmarkProgress() {
    const lm = st.landmarks.find((x) => x.landmark === st.lm);
    if (!lm) return;
    $("lm-progress").textContent = `this landmark: ${lm.mine} / ${lm.total}`;
    $("lm-bar").style.width = (lm.total ? 100 * lm.mine / lm.total : 0) + "%";
  }

  function queryImg(qu) {
    const img = document.createElement("img");
    img.src = `/query/${qu.index}`; img.alt = qu.name; img.title = qu.name; img.loading = "lazy";
    img.addEventListener("click", () => openViewer(`/query/${qu.index}?full=1`, `query ${qu.name}`));
    return img;
  }

  function showQueries() {
    const box = $("queries"); box.innerHTML = "";
    const lm = st.landmarks.find((x) => x.landmark === st.lm);
    if (!lm || !lm.queries.length) box.innerHTML = '<p class="hint">no query images</p>';
    else for (const qu of lm.queries) box.appendChild(queryImg(qu));
    // every other landmark's queries: "any benchmark landmark" is answerable without leaving the page
    const others = $("other-queries"); others.innerHTML = "";
    for (const o of st.landmarks) {
      if (o.landmark === st.lm || !o.queries.length) continue;
      const h = document.createElement("h3"); h.textContent = o.landmark; others.appendChild(h);
      for (const qu of o.queries) others.appendChild(queryImg(qu));
    }
    $("other-box").hidden = !others.children.length;
  }

  async function selectLandmark(name, position) {
    st.lm = name; $("landmark").value = name; $("done").hidden = true;
    // a filter's list, or the inlier order, starts at its first item
    if (st.show !== "all" || st.sort !== "rank") position = 0;
    else if (position === undefined) {
      position = (await api("/api/resume?" + q({ landmark: name, reviewer: st.name }))).position;
    }
    showLandmarkProgress(); showQueries();
    await loadPage(Math.floor(position / PAGE) * PAGE, position);
  }

  // ---------------------------------------------------------------- the grid
  const fetchPage = (where) =>
    api("/api/items?" + q({ landmark: st.lm, limit: PAGE, reviewer: st.name, show: st.show, sort: st.sort,
                               ...where }));
  function showPage(data, position) {
    st.offset = data.offset; st.total = data.total; st.items = data.items; st.minInliers = data.min_inliers;
    st.cursor = Math.max(0, Math.min(st.items.length - 1, (position ?? st.offset) - st.offset));
    render();
  }
  async function loadPage(offset, position) { showPage(await fetchPage({ offset }), position); }

  // A filter's list changes as votes are cast (an item decided leaves "undecided"): its next
  // page starts after this page's last item, never at an offset counted before the votes.
  async function pageAfter() {
    const last = st.items[st.items.length - 1];
    if (!last) return false;
    const data = await fetchPage({ after: last.id });
    if (!data.items.length) { toast("the end of this list"); return false; }
    showPage(data);
    return true;
  }

  function render() {
    const grid = $("grid"); grid.innerHTML = "";
    if (!st.items.length) {
      grid.innerHTML = `<div class="empty">${st.show === "all" ? "nothing queued" : "nothing to show here"}</div>`;
      $("range").textContent = "0 of 0"; return;
    }
    st.items.forEach((it, i) => {
      const tile = document.createElement("div");
      tile.className = "tile"; tile.dataset.index = i; tile.dataset.itemId = it.id;
      const img = document.createElement("img");
      img.loading = "lazy"; img.src = `/thumb/${it.id}`; img.alt = `candidate ${it.photo_id}`;
      img.width = 256; img.height = 256;
      const badge = document.createElement("span"); badge.className = "badge";
      const meta = document.createElement("div"); meta.className = "meta";
      const label = document.createElement("span"); label.textContent = `#${it.rank}`;
      label.title = `photo ${it.photo_id}, score ${it.score ?? "?"}`;
      if (it.inliers !== null && it.inliers !== undefined && it.inliers >= 0) {
        const geo = document.createElement("span"); geo.className = "inliers"; geo.textContent = ` · ${it.inliers} inl`;
        geo.title = `${it.inliers} RANSAC inliers with ${it.inlier_image || "no landmark image"}`;
        label.appendChild(geo);
        if (st.minInliers !== null && it.inliers >= st.minInliers) tile.classList.add("geo");
      }
      const btns = document.createElement("span"); btns.className = "btns";
      for (const v of ["y", "n", "u"]) {
        const b = document.createElement("button"); b.type = "button"; b.textContent = v; b.dataset.vote = v;
        b.title = { y: "shows the landmark", n: "does not", u: "unclear" }[v];
        b.addEventListener("click", (e) => {
          e.stopPropagation(); enqueue(() => { st.cursor = i; return castVote(v); });
        });
        btns.appendChild(b);
      }
      meta.append(label, btns);
      tile.append(img, badge, meta);
      tile.addEventListener("click", () => { st.cursor = i; paintCursor(); });
      tile.addEventListener("dblclick", () => { st.cursor = i; paintCursor(); openLarge(); });
      grid.appendChild(tile);
      paintTile(i);
    });
    const end = st.offset + st.items.length;
    const shown = $("show").selectedOptions[0].textContent;
    $("range").textContent = `${st.offset + 1}–${end} of ${st.total}` + (st.show === "all" ? "" : ` (${shown})`);
    $("prev").disabled = st.offset === 0; $("next").disabled = end >= st.total;
    paintCursor();
  }

  function paintTile(i) {
    const tile = $("grid").children[i]; const it = st.items[i];
    if (!tile || !it) return;
    tile.classList.remove("vote-y", "vote-n", "vote-u");
    if (it.vote) tile.classList.add("vote-" + it.vote);
    tile.dataset.vote = it.vote || "";
    tile.querySelector(".badge").textContent = it.vote ? { y: "landmark", n: "no", u: "unclear" }[it.vote] : "";
  }

  function paintCursor() {
    for (const t of $("grid").querySelectorAll(".tile.cursor")) t.classList.remove("cursor");
    const tile = $("grid").children[st.cursor];
    if (tile && tile.classList) {
      tile.classList.add("cursor");
      tile.scrollIntoView({ block: "nearest" });
    }
    if (!$("viewer").hidden) openLarge();
  }

  function columns() {
    const tiles = $("grid").children;
    if (tiles.length < 2) return 1;
    const top = tiles[0].offsetTop; let n = 0;
    while (n < tiles.length && tiles[n].offsetTop === top) n++;
    return Math.max(1, n);
  }

  async function move(delta) {
    const target = st.offset + st.cursor + delta;
    if (target < 0) return;
    if (st.show !== "all" && target >= st.offset + st.items.length) { await pageAfter(); return; }
    if (target >= st.total) return;
    if (target < st.offset || target >= st.offset + st.items.length) {
      await loadPage(Math.floor(target / PAGE) * PAGE, target);
    } else { st.cursor = target - st.offset; paintCursor(); }
  }

  // ---------------------------------------------------------------- votes
  // Keys are handled strictly in order (a fast reviewer types ahead of the network).
  let chain = Promise.resolve();
  let pending = 0;  // exposed as body[data-pending] so a test (or a curious user) sees the backlog
  const enqueue = (fn) => {
    document.body.dataset.pending = String(++pending);
    chain = chain.then(fn).catch((e) => toast(e.message))
      .finally(() => { document.body.dataset.pending = String(--pending); });
    return chain;
  };

  async function castVote(v) {
    const it = st.items[st.cursor];
    if (!it) return;
    try {
      await api("/api/votes", { body: { item_id: it.id, vote: v, reviewer: st.name } });
      const wasOpen = !it.vote; it.vote = v; paintTile(st.cursor);
      if (wasOpen) bump(st.lm, 1);
      await move(1);
    } catch (e) { toast("vote not saved: " + e.message); }
  }

  // The rest of the page, from the cursor on: one decision for every item not decided yet (your
  // own votes stay), one undo takes it back. Then on to the next page, or the next landmark.
  async function castBulk(v) {
    const rest = st.items.slice(st.cursor).filter((it) => !it.vote);
    if (!rest.length) { await afterPage(); return; }
    try {
      const r = await api("/api/votes/bulk", { body: { item_ids: rest.map((it) => it.id), vote: v, reviewer: st.name } });
      for (const it of rest) it.vote = v;
      st.items.forEach((_, i) => paintTile(i));
      bump(st.lm, r.voted);
      toast(`${r.voted} marked "${{ y: "landmark", n: "not landmark", u: "unclear" }[v]}" — z undoes them all`);
      await afterPage();
    } catch (e) { toast("bulk decision not saved: " + e.message); }
  }

  async function afterPage() {
    if (st.show !== "all") { if (!(await pageAfter())) showDone(); return; }
    const end = st.offset + st.items.length;
    if (end < st.total) { await loadPage(end, end); return; }
    showDone();
  }

  // "Landmark done → next": shown when this reviewer has decided every item of the landmark.
  function showDone() {
    const lm = st.landmarks.find((x) => x.landmark === st.lm);
    const done = lm && lm.mine >= lm.total;
    const next = st.landmarks.find((x) => x.mine < x.total && x.landmark !== st.lm);
    $("done").hidden = !done;
    if (!done) return;
    $("done-text").textContent = next ? `${lm.landmark}: all ${lm.total} decided.` : `All ${st.landmarks.length} landmarks decided. Thank you!`;
    $("done-next").hidden = !next;
    if (next) { $("done-next").textContent = `next: ${next.landmark} ▶`; $("done-next").dataset.landmark = next.landmark; }
  }
  $("done-next").addEventListener("click", () => enqueue(() => nextOpen()));
  function nextOpen() {
    const next = st.landmarks.find((x) => x.mine < x.total && x.landmark !== st.lm);
    if (next) return selectLandmark(next.landmark);
  }

  function bump(landmark, d) {
    const lm = st.landmarks.find((x) => x.landmark === landmark);
    if (lm) { lm.mine += d; }
    const mine = st.landmarks.reduce((a, x) => a + x.mine, 0);
    const total = st.landmarks.reduce((a, x) => a + x.total, 0);
    const pct = total ? 100 * mine / total : 0;
    $("all-progress").textContent = `all: ${mine} / ${total} (${pct.toFixed(1)}%)`;
    $("all-bar").style.width = pct + "%";
    const opt = [...$("landmark").options].find((o) => o.value === landmark);
    if (opt && lm) opt.textContent = `${lm.landmark}  (${lm.mine}/${lm.total})${lm.mine >= lm.total ? " ✓" : ""}`;
    showLandmarkProgress();
    showDone();
  }

  async function undo() {
    try {
      const r = await api("/api/undo", { body: { reviewer: st.name } });
      if (!r.undone) { toast("nothing to undo"); return; }
      await loadLandmarks();
      const u = r.undone;
      if (u.landmark !== st.lm || st.show !== "all" || st.sort !== "rank") {
        await selectLandmark(u.landmark, u.position);
        const i = st.items.findIndex((x) => x.id === u.item_id);  // in a filter: its first page
        if (i >= 0) { st.cursor = i; paintCursor(); }
      }
      else { await loadPage(Math.floor(u.position / PAGE) * PAGE, u.position); }
    } catch (e) { toast("undo failed: " + e.message); }
  }

  // ---------------------------------------------------------------- large view
  function openViewer(src, caption, query) {
    $("viewer-img").src = src; $("viewer-cap").textContent = caption;
    const qbox = $("viewer-query"); qbox.hidden = !query;
    if (query) { $("viewer-qimg").src = `/query/${query.index}?full=1`; $("viewer-qcap").textContent = query.caption; }
    // the landmark's other queries, small, under the one shown: every view of it at a glance
    const strip = $("viewer-qothers"); strip.innerHTML = "";
    const lm = st.landmarks.find((x) => x.landmark === st.lm);
    for (const qu of (query && lm ? lm.queries : [])) {
      if (qu.index === query.index) continue;
      const img = document.createElement("img"); img.src = `/query/${qu.index}`; img.alt = qu.name; img.title = qu.name;
      strip.appendChild(img);
    }
    $("viewer").hidden = false;
  }
  // The query this candidate matched best (any landmark's), else this landmark's first.
  function bestQuery(it) {
    for (const lm of st.landmarks) {
      const hit = lm.queries.find((x) => x.name === it.best_query);
      if (hit) return { index: hit.index, caption: `best-matching query: ${hit.name} (${lm.landmark})` };
    }
    const lm = st.landmarks.find((x) => x.landmark === st.lm);
    return lm && lm.queries.length ? { index: lm.queries[0].index, caption: `query: ${lm.queries[0].name}` } : null;
  }
  function openLarge() {
    const it = st.items[st.cursor];
    if (!it) return;
    const vote = it.vote ? ` · your vote: ${it.vote}` : "";
    openViewer(`/image/${it.id}`, `candidate #${it.rank} · photo ${it.photo_id}${vote} — y / n / u to decide, Enter to close`,
               bestQuery(it));
    const geo = it.inliers > 0; $("viewer-geo").hidden = !geo;
    if (geo) {
      $("viewer-geo-img").src = `/matches/${it.id}`;
      $("viewer-geo-cap").textContent = `${it.inliers} inliers with ${it.inlier_image}: the matched keypoints`;
    }
  }
  const closeOverlays = () => { $("viewer").hidden = true; $("help").hidden = true; };
  $("viewer").addEventListener("click", closeOverlays);
  $("help").addEventListener("click", closeOverlays);
  $("help-btn").addEventListener("click", () => { $("help").hidden = false; });

  // ---------------------------------------------------------------- keyboard
  document.addEventListener("keydown", (e) => {
    if (!$("name-dialog").hidden || e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.target && (e.target.tagName === "INPUT" || e.target.tagName === "SELECT")) {
      if (e.key !== "Escape") return;
    }
    const k = e.key;
    let handled = true;
    if (k === "y" || k === "n" || k === "u") enqueue(() => castVote(k));
    else if (k === "N") enqueue(() => castBulk("n"));
    else if (k === "g") enqueue(() => nextOpen());
    else if (k === "z") enqueue(undo);
    else if (k === "ArrowRight") enqueue(() => move(1));
    else if (k === "ArrowLeft") enqueue(() => move(-1));
    else if (k === "ArrowDown") { const c = columns(); enqueue(() => move(c)); }
    else if (k === "ArrowUp") { const c = columns(); enqueue(() => move(-c)); }
    else if (k === "Enter" || k === " ") enqueue(() => { if ($("viewer").hidden) openLarge(); else closeOverlays(); });
    else if (k === "Escape") closeOverlays();
    else if (k === "PageDown") enqueue(() => nextPage(1));
    else if (k === "PageUp") enqueue(() => nextPage(-1));
    else if (k === "]" || k === "[") enqueue(() => switchBy(k === "]" ? 1 : -1));
    else if (k === "?") $("help").hidden = false;
    else handled = false;
    if (handled) e.preventDefault();
  });

  function nextPage(d) {
    if (d > 0 && st.show !== "all") return pageAfter();
    const off = st.offset + d * PAGE;
    if (off >= 0 && off < st.total) return loadPage(off, off);
  }
  function switchBy(d) {
    const i = st.landmarks.findIndex((x) => x.landmark === st.lm);
    const j = i + d;
    if (j >= 0 && j < st.landmarks.length) return selectLandmark(st.landmarks[j].landmark);
  }
  $("prev").addEventListener("click", () => enqueue(() => nextPage(-1)));
  $("next").addEventListener("click", () => enqueue(() => nextPage(1)));
  $("show").addEventListener("change", (e) => {
    st.show = e.target.value; e.target.blur(); enqueue(() => selectLandmark(st.lm));
  });
  $("sort").addEventListener("change", (e) => {
    st.sort = e.target.value; e.target.blur(); enqueue(() => selectLandmark(st.lm, 0));
  });
  $("landmark").addEventListener("change", (e) => {
    const name = e.target.value; e.target.blur(); enqueue(() => selectLandmark(name));
  });

  // ---------------------------------------------------------------- reviewer name
  function askName() {
    $("name-input").value = st.name; $("name-dialog").hidden = false; $("name-input").focus();
  }
  $("name-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const name = $("name-input").value.trim().replace(/\s+/g, " ");
    if (!name) return;
    st.name = name; localStorage.setItem("mining-review-name", name);
    $("name-dialog").hidden = true;
    start();
  });
  $("rename").addEventListener("click", askName);

  async function start() {
    $("who").textContent = st.name;
    try {
      await loadLandmarks();
      if (!st.landmarks.length) { $("grid").innerHTML = '<div class="empty">the review queue is empty</div>'; return; }
      // Resume: the first landmark this reviewer has not finished, at its first undecided item.
      const open = st.landmarks.find((x) => x.mine < x.total) || st.landmarks[0];
      await selectLandmark(open.landmark);
      $("grid").focus();
      document.body.dataset.ready = "1";  // tests wait for this
    } catch (e) { toast("could not load: " + e.message); }
  }

  // A personal (or one-person) link names its reviewer: no name to enter, none to change.
  api("/api/me").then((me) => {
    if (me.reviewer) { st.name = me.reviewer; $("rename").hidden = true; start(); }
    else if (st.name) start(); else askName();
  }).catch((e) => toast("could not load: " + e.message));
})();
