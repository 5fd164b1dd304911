/**
 * The console's one script, served as a file (the Content-Security-Policy allows no inline script).
 * Everything works without it; with it, copy buttons copy and pages that ask refresh their content.
 */
export const CONSOLE_JS = `'use strict';
(function () {
  function copy(button) {
    var target = document.getElementById(button.getAttribute('data-copy'));
    if (!target) return;
    var done = function () { button.textContent = 'Copied'; setTimeout(function () { button.textContent = 'Copy'; }, 2000); };
    var text = target.value !== undefined ? target.value : target.textContent;
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { select(target); });
    } else {
      select(target);
      try { if (document.execCommand('copy')) done(); } catch (e) {}
    }
  }
  function select(target) {
    if (target.select) target.select();
    else { var range = document.createRange(); range.selectNodeContents(target); var s = window.getSelection(); s.removeAllRanges(); s.addRange(range); }
  }
  function wire(root) {
    var buttons = root.querySelectorAll('button[data-copy]');
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].hidden = false;
      buttons[i].addEventListener('click', function (event) { copy(event.currentTarget); });
    }
  }
  function refresh(main, seconds) {
    setTimeout(function tick() {
      var busy = document.activeElement && /INPUT|SELECT|TEXTAREA|BUTTON/.test(document.activeElement.tagName);
      if (document.hidden || busy) { setTimeout(tick, seconds * 1000); return; }
      fetch(location.href, { credentials: 'same-origin', headers: { 'X-Console-Refresh': '1' } }).then(function (response) {
        if (!response.ok || response.redirected) return;
        return response.text().then(function (html) {
          var next = new DOMParser().parseFromString(html, 'text/html').getElementById('main');
          if (!next) return;
          main.innerHTML = next.innerHTML;
          wire(main);
          setTimeout(tick, seconds * 1000);
        });
      }, function () { setTimeout(tick, seconds * 1000); });
    }, seconds * 1000);
  }
  document.addEventListener('DOMContentLoaded', function () {
    wire(document);
    var main = document.getElementById('main');
    var seconds = main && Number(main.getAttribute('data-refresh'));
    if (seconds > 0) refresh(main, seconds);
  });
})();
`;
