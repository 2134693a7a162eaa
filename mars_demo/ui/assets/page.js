// MARS Demo page: keyboard and touch access to the answer's tokens. Loaded once in the page's
// <head> (layout.launch_options); every listener is on the document, so answers that Gradio
// renders later are covered too.
//
// - One tab stop per answer (roving tabindex): the answer's first token has tabindex 0, the
//   others -1; ArrowLeft / ArrowRight (and Home / End) move the focus between the tokens, and
//   the focused token keeps the tab stop. A focused (or tapped, or hovered) token shows its
//   details, the CSS tooltip of its data-tip.
// - The tooltip hangs below the token itself, moved left where it would leave the answer's box.
// - The queue line: Gradio writes "queue: 2/3 | 4.1/9.0s" over a waiting visitor's answer box;
//   it is put into words (window.marsTexts, from mars_demo/texts/) above the answer box
//   (#mars-queue-line) and in data-mars-queue, which the CSS uses to hide Gradio's line.
// - The work note under a public page's sliders says samples x max new tokens as they move.
// - When an analysis is done, one live region says so with the verdict (screen readers), and
//   the focus moves to the verdict if it was on Ask (which the analysis disabled) or nowhere;
//   the "Skip to the answer" link after Ask moves it there too.
// - A folded <details data-keep> stays open when the panel holding it is drawn again (the
//   scoring toggle redraws the answer).
// - A table box that scrolls sideways takes the focus (tabindex), so keyboard users can scroll it.
(() => {
  if (window.__marsPage) return;
  window.__marsPage = true;
  const TOKEN = ".mars-tok";
  const tokensOf = (box) => [...box.querySelectorAll(TOKEN)];
  const tokenOf = (target) => (target && target.closest ? target.closest(TOKEN) : null);

  function place(token) {
    const box = token.closest(".mars-answer-text");
    if (!box) return;
    const outer = box.getBoundingClientRect();
    const rects = token.getClientRects();
    const rect = rects.length ? rects[rects.length - 1] : token.getBoundingClientRect();
    token.style.setProperty("--tip-top", `${rect.bottom - outer.top + 2}px`);
    let width = parseFloat(getComputedStyle(token, "::after").width);
    if (!(width > 0)) width = Math.min(480, outer.width);
    const left = Math.max(0, Math.min(rect.left - outer.left, outer.width - width));
    token.style.setProperty("--tip-left", `${left}px`);
  }

  function keep(tokens, index) {
    tokens.forEach((t, k) => { t.tabIndex = k === index ? 0 : -1; });
  }

  document.addEventListener("keydown", (event) => {
    const token = tokenOf(event.target);
    if (!token) return;
    const box = token.closest(".mars-answer-text");
    const tokens = tokensOf(box);
    const i = tokens.indexOf(token);
    let j;
    if (event.key === "ArrowRight") j = Math.min(i + 1, tokens.length - 1);
    else if (event.key === "ArrowLeft") j = Math.max(i - 1, 0);
    else if (event.key === "Home") j = 0;
    else if (event.key === "End") j = tokens.length - 1;
    else return;
    event.preventDefault();
    keep(tokens, j);
    tokens[j].focus();
  });

  document.addEventListener("focusin", (event) => {
    const token = tokenOf(event.target);
    if (!token) return;
    const box = token.closest(".mars-answer-text");
    const tokens = tokensOf(box);
    keep(tokens, tokens.indexOf(token));
    place(token);
  });

  document.addEventListener("mouseover", (event) => {
    const token = tokenOf(event.target);
    if (token) place(token);
  });

  // --- the queue line ----------------------------------------------------------------------
  const T = window.marsTexts || {};
  const fill = (template, values) =>
    template.replace(/\{(\w+)\}/g, (_, key) => (key in values ? values[key] : ""));
  const QUEUE = /queue:\s*(\d+)\/(\d+)\s*\|\s*([\d.]+)(?:\/([\d.]+))?s/;

  function queueLine(text) {
    const m = QUEUE.exec(text);
    if (!m || !T.QUEUE_PLACE) return null;
    const [, place, size, elapsed, eta] = m;
    let line = fill(T.QUEUE_PLACE, { place, size });
    if (eta !== undefined && parseFloat(eta) > parseFloat(elapsed)) {
      line += fill(T.QUEUE_ESTIMATE, { elapsed, eta });
    } else {
      line += fill(T.QUEUE_ELAPSED, { elapsed });
    }
    return line;
  }

  function relabel() {
    let shown = null;
    for (const el of document.querySelectorAll("#mars-answer .progress-text")) {
      const line = queueLine(el.textContent || "");
      if (line === null) el.removeAttribute("data-mars-queue");
      else if (el.getAttribute("data-mars-queue") !== line) el.setAttribute("data-mars-queue", line);
      if (line !== null) shown = line;
    }
    const box = document.querySelector("#mars-queue-line .mars-queue-line");
    if (!box) return;
    if (shown === null) {
      if (!box.hidden) box.hidden = true;
    } else {
      if (box.textContent !== shown) box.textContent = shown;
      if (box.hidden) box.hidden = false;
    }
  }

  new MutationObserver(relabel).observe(document.documentElement, {
    subtree: true, childList: true, characterData: true,
  });

  // --- the work note under the sliders (a public page) --------------------------------------
  const sliderValue = (id) => {
    const input = document.querySelector(`#${id} input[type=number]`);
    return input ? parseInt(input.value, 10) : NaN;
  };

  function updateWorkNote() {
    const note = document.querySelector("#mars-work-note .mars-work-note");
    if (!note || !T.ACCESS_WORK_NOTE) return;
    const samples = sliderValue("mars-samples-n");
    const tokens = sliderValue("mars-max-new-tokens");
    if (!(samples > 0 && tokens > 0)) return;
    const limit = parseInt(note.dataset.limit, 10);
    const work = `${samples} × ${tokens} = ${samples * tokens}`;
    const over = samples * tokens > limit;
    note.textContent = fill(over ? T.ACCESS_WORK_OVER : T.ACCESS_WORK_NOTE, { limit, work });
    note.classList.toggle("mars-work-over", over);
  }

  for (const type of ["input", "change"]) {
    document.addEventListener(type, (event) => {
      if (event.target && event.target.closest &&
          event.target.closest("#mars-samples-n, #mars-max-new-tokens")) updateWorkNote();
    });
  }

  // --- the verdict: announced once per analysis, and where the focus goes -------------------
  const live = document.createElement("div");
  live.id = "mars-live";
  live.className = "mars-sr-only";
  live.setAttribute("role", "status");
  live.setAttribute("aria-live", "polite");
  const addLive = () => { if (!live.isConnected && document.body) document.body.appendChild(live); };
  addLive();
  document.addEventListener("DOMContentLoaded", addLive);
  let lastVerdict = null;

  function verdictShown() {
    const verdict = document.querySelector("#mars-verdict .mars-verdict");
    if (!verdict || verdict === lastVerdict) return;
    lastVerdict = verdict;
    addLive();
    const line = verdict.querySelector(".mars-verdict-line");
    const chance = verdict.querySelector(".mars-verdict-chance");
    live.textContent = [T.VERDICT_DONE || "", line ? line.textContent : "",
                        chance ? chance.textContent : ""].join(" ").trim();
    const active = document.activeElement;
    const fromAsk = !active || active === document.body || !!active.closest("#mars-ask, #mars-skip");
    if (fromAsk) verdict.focus({ preventScroll: false });
  }

  document.addEventListener("click", (event) => {
    const link = event.target && event.target.closest && event.target.closest("a.mars-skip");
    if (!link) return;
    const target = document.querySelector("#mars-verdict .mars-verdict") ||
                   document.querySelector("#mars-answer");
    if (!target) return;
    event.preventDefault();
    if (!target.hasAttribute("tabindex")) target.setAttribute("tabindex", "-1");
    target.focus();
    target.scrollIntoView({ block: "center" });
  });

  // --- folded details that stay as the visitor left them -------------------------------------
  const kept = new Map();
  document.addEventListener("toggle", (event) => {
    const el = event.target;
    if (el && el.matches && el.matches("details[data-keep]")) kept.set(el.dataset.keep, el.open);
  }, true);

  function keepOpen() {
    for (const el of document.querySelectorAll("details[data-keep]")) {
      const open = kept.get(el.dataset.keep);
      if (open !== undefined && el.open !== open) el.open = open;
    }
  }

  // --- table boxes that scroll sideways take the focus ---------------------------------------
  function scrollers() {
    for (const wrap of document.querySelectorAll(".mars-table-wrap")) {
      const scrolls = wrap.scrollWidth > wrap.clientWidth + 1 || wrap.scrollHeight > wrap.clientHeight + 1;
      if (scrolls && !wrap.hasAttribute("tabindex")) {
        wrap.setAttribute("tabindex", "0");
        // a region's name must be its own: the table's first column headers name it
        const heads = [...wrap.querySelectorAll("thead th")].slice(0, 3)
          .map((th) => th.textContent.trim()).filter(Boolean).join(", ");
        wrap.setAttribute("role", "region");
        wrap.setAttribute("aria-label", `${T.SCROLL_REGION || "Table"}: ${heads}`);
      } else if (!scrolls && wrap.getAttribute("tabindex") === "0") {
        wrap.removeAttribute("tabindex");
        wrap.removeAttribute("role");
        wrap.removeAttribute("aria-label");
      }
    }
  }

  let pending = false;
  function afterChange() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      verdictShown();
      keepOpen();
      scrollers();
    });
  }
  new MutationObserver(afterChange).observe(document.documentElement, {
    subtree: true, childList: true,
  });
  window.addEventListener("resize", afterChange);
})();
