// MARS Demo page: keyboard and touch access to the answer's tokens. Loaded once in the page's
// <head> (layout.launch_options); every listener is on the document, so answers that Gradio
// renders later are covered too.
//
// - One tab stop per answer (roving tabindex): the answer's first token has tabindex 0, the
//   others -1; ArrowLeft / ArrowRight (and Home / End) move the focus between the tokens, and
//   the focused token keeps the tab stop. A focused (or tapped, or hovered) token shows its
//   details, the CSS tooltip of its data-tip; Esc hides them until another token is hovered or
//   a token takes the focus (WCAG 1.4.13), and the pointer may rest on them.
// - The tooltip hangs below the token itself, moved left where it would leave the answer's box.
// - The press of Ask (a click, a tap, Enter, an example): window.marsPress, called by the
//   events' own JS before the analysis is sent (mars_demo/ui/page/layout.py), says at once that the
//   page works: Ask busy, the last result gone, the verdict line "being worked out", the view on
//   it. Gradio runs the events of one trigger in order and waits for a streaming one to end
//   before the next, so this cannot be an event after the analysis.
// - Gradio's "processing | 0.4/39.9s" over the answer box (its own estimate after the slash) is
//   hidden (data-mars-guess): the verdict line says the engine's expected wait.
// - The queue line: Gradio writes "queue: 2/3 | 4.1/9.0s" over a waiting visitor's answer box;
//   it is put into words (window.marsTexts, from mars_demo/texts/) above the answer box
//   (#mars-queue-line) and in data-mars-queue, which the CSS uses to hide Gradio's line. Its
//   place is said; Gradio's estimate is not (it guesses from other events' times).
// - The work note under a public page's sliders says samples x max new tokens as they move.
// - The live region says at the press that the analysis started; a press while it runs is
//   answered in words under Ask and aloud (the page is still working on the first question).
// - The scoring and colour controls are shown once an answer is (html.mars-answered).
// - Each analysis is announced once by one live region, "Analysis done." and the verdict, when
//   its verdict (data-analysis: an id per analysis) is shown; at the press the region says the
//   analysis started, so two verdicts in the same words are both announced. The focus then moves to the
//   verdict if it was on Ask (which the analysis disabled) or nowhere, every time; the "Skip
//   to the answer" link after Ask moves it there too.
// - Gradio's folds get aria-expanded and a name without their arrow; a dropdown's open list of
//   choices is named like the dropdown.
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
    tipsBack();  // a token reached by the focus shows its details, also the one Esc hid on hover
    place(token);
  });

  document.addEventListener("mouseover", (event) => {
    const token = tokenOf(event.target);
    if (!token) return;
    if (token !== hidden) tipsBack();
    place(token);
  });

  // Esc hides the token details (hover or focus) until another token is hovered, or a token
  // takes the focus (the focus stays where it was when Esc hid them)
  let hidden = null;
  const tipsBack = () => {
    if (hidden === null) return;
    hidden = null;
    document.documentElement.classList.remove("mars-tips-off");
  };
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    const token = tokenOf(document.activeElement) || document.querySelector(".mars-tok:hover");
    if (!token) return;
    hidden = token;
    document.documentElement.classList.add("mars-tips-off");
  });

  // --- the queue line ----------------------------------------------------------------------
  const T = window.marsTexts || {};
  const fill = (template, values) =>
    template.replace(/\{(\w+)\}/g, (_, key) => (key in values ? values[key] : ""));
  const QUEUE = /queue:\s*(\d+)\/(\d+)\s*\|\s*([\d.]+)(?:\/([\d.]+))?s/;

  // [the place in line, the seconds waited]: Gradio's estimate is left out, a guess from the
  // times of other events that the page cannot stand behind
  function queueLine(text) {
    const m = QUEUE.exec(text);
    if (!m || !T.QUEUE_PLACE) return null;
    const [, place, size, elapsed] = m;
    return [fill(T.QUEUE_PLACE, { place, size }), fill(T.QUEUE_ELAPSED, { elapsed })];
  }

  // Gradio's line while the analysis runs, "processing | 0.4/39.9s", carries its own estimate
  // after the slash (a guess from other events' times, not the engine's): hidden, the verdict
  // line says the expected wait from the engine's recent analyses
  const GUESS = /processing\s*\|\s*[\d.]+\/[\d.]+s/;

  function relabel() {
    let shown = null;
    for (const el of document.querySelectorAll("#mars-answer .progress-text")) {
      const guess = GUESS.test(el.textContent || "");
      if (guess !== el.hasAttribute("data-mars-guess")) {
        el.toggleAttribute("data-mars-guess", guess);
      }
      const line = queueLine(el.textContent || "");
      const words = line === null ? null : line.join("");
      if (line === null) el.removeAttribute("data-mars-queue");
      else if (el.getAttribute("data-mars-queue") !== words) el.setAttribute("data-mars-queue", words);
      if (line !== null) shown = line;
    }
    const box = document.querySelector("#mars-queue-line .mars-queue-line");
    if (!box) return;
    if (shown === null) {
      if (!box.hidden) box.hidden = true;
      return;
    }
    // the place is a live status (said when it changes); the seconds are not (said ten times
    // a second otherwise)
    const place = box.querySelector(".mars-queue-place") || box.appendChild(document.createElement("span"));
    const waited = box.querySelector(".mars-queue-waited") || box.appendChild(document.createElement("span"));
    place.className = "mars-queue-place";
    waited.className = "mars-queue-waited";
    waited.setAttribute("aria-hidden", "true");
    if (place.textContent !== shown[0]) place.textContent = shown[0];
    if (waited.textContent !== shown[1]) waited.textContent = shown[1];
    if (box.hidden) box.hidden = false;
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

  // --- the press of Ask: busy at once, nothing of the last question left as current ---------
  const live = document.createElement("div");
  live.id = "mars-live";
  live.className = "mars-sr-only";
  live.setAttribute("role", "status");
  live.setAttribute("aria-live", "polite");
  const addLive = () => { if (!live.isConnected && document.body) document.body.appendChild(live); };
  addLive();
  document.addEventListener("DOMContentLoaded", addLive);
  const esc = (text) => String(text).replace(/[&<>"']/g, (c) => (
    { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  const update = (props) => ({ __type__: "update", ...props });
  let lastAnalysis = null;  // the data-analysis of the verdict announced last
  let pressed = false;  // a press since that verdict: its verdict takes the focus (see below)

  // The outputs of a press, by name (the layout passes the names in its outputs' order); None
  // (undefined) while this page's analysis runs: Ask takes no press then, and Enter or an
  // example must not clear the analysis under way.
  window.marsPress = (question, names) => {
    const ask = document.querySelector("#mars-ask");
    if (ask && ask.disabled) {
      if (pressed) stillWorking();  // not in the instant between the verdict and Ask's return
      return undefined;
    }
    addLive();
    live.textContent = T.ASK_STARTED || "";
    still.hidden = true;
    pressed = true;
    const asked = String(question || "").trim();
    const values = {
      ask: update({ value: T.ASK_BUSY, interactive: false }),
      verdict: `<div class="mars-verdict mars-verdict-working" data-state="working" tabindex="-1">` +
        `<p class="mars-verdict-line">${esc(T.VERDICT_WORKING)}</p></div>`,
      answer: `<div class="mars-answer mars-streaming"><p class="mars-question">${esc(asked)}</p>` +
        `<p class="mars-answer-text"><span class="mars-muted">${esc(T.ANSWER_WAITING)}</span>` +
        `<span class="mars-cursor" aria-hidden="true"></span></p></div>`,
      warnings: "", error: "", progress: "",
      results: update({ visible: false }),
    };
    requestAnimationFrame(() => requestAnimationFrame(bringVerdict));
    return names.map((name) => values[name]);
  };

  // A press while this page's question runs (Ask takes no click then, so its pointerdown is
  // caught here; Enter and an example come through marsPress): said, in words and aloud, until
  // the verdict is shown.
  const still = document.createElement("p");
  still.id = "mars-still-working";
  still.className = "mars-still-working";
  still.hidden = true;
  function stillWorking() {
    const row = document.querySelector("#mars-ask-row");
    if (row && still.parentElement !== row.parentElement) row.after(still);
    still.textContent = T.ASK_STILL_WORKING || "";
    still.hidden = false;
    addLive();
    live.textContent = T.ASK_STILL_WORKING || "";
  }
  document.addEventListener("pointerdown", (event) => {
    const ask = event.target && event.target.closest && event.target.closest("#mars-ask");
    if (ask && ask.disabled && pressed) stillWorking();
  }, true);

  // the verdict's box in view with room under it for the answer (on a phone the question box
  // and the examples fill the screen above it); where it is so already, nothing moves
  function bringVerdict() {
    const box = document.querySelector("#mars-verdict");
    if (!box) return;
    const r = box.getBoundingClientRect();
    if (r.top >= 0 && r.top <= window.innerHeight * 0.7) return;
    box.scrollIntoView({ block: "start" });
  }

  function fullyInView(el) {
    const r = el.getBoundingClientRect();
    return r.top >= 0 && r.bottom <= window.innerHeight;
  }

  // --- the verdict: announced once per analysis, and where the focus goes -------------------
  function verdictShown() {
    const verdict = document.querySelector("#mars-verdict .mars-verdict[data-analysis]");
    if (!verdict || verdict.dataset.analysis === lastAnalysis) return;
    lastAnalysis = verdict.dataset.analysis;
    still.hidden = true;
    document.documentElement.classList.add("mars-answered");
    addLive();
    const line = verdict.querySelector(".mars-verdict-line");
    const more = [...verdict.querySelectorAll(".mars-verdict-said")].map((el) => el.textContent);
    live.textContent = [T.VERDICT_DONE || "", line ? line.textContent : "", ...more]
      .join(" ").replace(/\s+/g, " ").trim();
    const active = document.activeElement;
    const fromAsk = !active || active === document.body || !!active.closest("#mars-ask, #mars-skip");
    if (pressed && fromAsk) verdict.focus({ preventScroll: true });
    pressed = false;
    if (!fullyInView(verdict)) verdict.scrollIntoView({ block: "nearest" });
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

  // --- Gradio's folds and dropdowns, named for screen readers --------------------------------
  function names() {
    for (const button of document.querySelectorAll("button.label-wrap")) {
      const open = String(button.classList.contains("open"));
      if (button.getAttribute("aria-expanded") !== open) button.setAttribute("aria-expanded", open);
      for (const icon of button.querySelectorAll(".icon")) {
        if (!icon.hasAttribute("aria-hidden")) icon.setAttribute("aria-hidden", "true");
      }
    }
    for (const list of document.querySelectorAll('ul[role="listbox"]')) {
      if (list.hasAttribute("aria-label") || list.hasAttribute("aria-labelledby")) continue;
      const block = list.closest(".block");
      const input = block && block.querySelector('input[role="listbox"], input');
      const label = (input && input.getAttribute("aria-label")) ||
        (block && block.querySelector("label, [data-testid='block-info']")?.textContent.trim());
      if (label) list.setAttribute("aria-label", label);
    }
  }

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
      names();
    });
  }
  new MutationObserver(afterChange).observe(document.documentElement, {
    subtree: true, childList: true, attributes: true, attributeFilter: ["class"],
  });
  window.addEventListener("resize", afterChange);
})();
