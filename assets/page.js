// MARS Demo page: keyboard and touch access to the answer's tokens. Loaded once in the page's
// <head> (layout.launch_options); every listener is on the document, so answers that Gradio
// renders later are covered too.
//
// - One tab stop per answer (roving tabindex): the answer's first token has tabindex 0, the
//   others -1; ArrowLeft / ArrowRight (and Home / End) move the focus between the tokens, and
//   the focused token keeps the tab stop. A focused (or tapped, or hovered) token shows its
//   details, the CSS tooltip of its data-tip.
// - The tooltip hangs below the token itself, moved left where it would leave the answer's box.
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
})();
