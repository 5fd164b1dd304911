/** The console's one stylesheet: system fonts, no web fonts or images, readable from a phone's width up. */
export const CONSOLE_CSS = `
:root{--ink:#1b1f24;--muted:#4a525c;--line:#d5dae0;--bg:#f6f7f9;--card:#fff;--accent:#0b5cad;--ok:#0f6b2f;--okbg:#e3f4e8;--warn:#7a4a00;--warnbg:#fff1d6;--bad:#9b1c1c;--badbg:#fde4e4}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;font:16px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--ink);background:var(--bg)}
a{color:var(--accent)}
.skip{position:absolute;left:-999px;top:0;background:var(--card);padding:.5rem}
.skip:focus{left:.5rem;z-index:2}
.top{display:flex;flex-wrap:wrap;align-items:center;gap:.25rem 1rem;padding:.5rem 1rem;background:#17324d;color:#fff}
.top a{color:#fff}
.brand{font-weight:700;text-decoration:none;margin-right:auto}
.top nav ul{display:flex;flex-wrap:wrap;gap:.25rem .9rem;list-style:none;margin:0;padding:0}
.top nav a{text-decoration:none;padding:.4rem 0;display:inline-block;min-height:44px;line-height:2.2}
.top nav a[aria-current=page]{border-bottom:3px solid #9cc9ff}
.logout{margin:0}
button,input,select{font:inherit}
button.link{background:none;border:0;color:#fff;text-decoration:underline;cursor:pointer;padding:.4rem 0;min-height:44px}
main{max-width:72rem;margin:0 auto;padding:1rem}
h1{font-size:1.5rem;margin:.25rem 0 1rem}
h2{font-size:1.15rem;margin:1.5rem 0 .5rem}
section,.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:1rem;margin:0 0 1rem}
section h2:first-child{margin-top:0}
.state{font-size:1.2rem;font-weight:600;padding:.75rem 1rem;border-radius:8px;border:1px solid var(--line);margin:0 0 1rem}
.state-delivering{background:var(--okbg);color:var(--ok)}
.state-catching_up,.state-buffering{background:var(--warnbg);color:var(--warn)}
.state-refusing{background:var(--badbg);color:var(--bad)}
.notice{background:#e6f0fb;border:1px solid #b6d0ee;padding:.6rem .9rem;border-radius:6px}
.error{background:var(--badbg);color:var(--bad);border:1px solid #f1b5b5;padding:.6rem .9rem;border-radius:6px}
.warning{background:var(--warnbg);color:var(--warn);border:1px solid #efd08a;padding:.6rem .9rem;border-radius:6px}
.scroll{overflow-x:auto;max-width:100%}
section.scroll{border:0;padding:0;margin:0;border-radius:0;background:none}
table{border-collapse:collapse;width:100%;font-size:.95rem}
th,td{text-align:left;padding:.4rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;color:var(--muted);white-space:nowrap}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.3rem 1rem;margin:0}
dl.facts dt{color:var(--muted)}
dl.facts dd{margin:0;overflow-wrap:anywhere}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.9rem}
pre{background:#f0f2f5;border:1px solid var(--line);border-radius:6px;padding:.75rem;white-space:pre-wrap;overflow-wrap:anywhere}
.badge{display:inline-block;padding:0 .45rem;border-radius:999px;font-size:.85rem;font-weight:600}
.badge-stale{background:var(--warnbg);color:var(--warn)}
.badge-live{background:var(--okbg);color:var(--ok)}
.badge-bad{background:var(--badbg);color:var(--bad)}
.muted{color:var(--muted)}
form.stack{display:grid;gap:.75rem;max-width:28rem}
label{font-weight:600;display:block}
td label{display:inline}
.hint{font-weight:400;color:var(--muted);font-size:.9rem;display:block}
input[type=text],input[type=password]{width:100%;padding:.55rem .6rem;border:1px solid #8a939e;border-radius:6px;min-height:44px}
input[readonly]{background:#f0f2f5}
button.primary,button.danger,button.plain{padding:.55rem 1rem;border-radius:6px;border:1px solid transparent;cursor:pointer;min-height:44px}
button.primary{background:var(--accent);color:#fff}
button.danger{background:var(--bad);color:#fff}
button.plain{background:var(--card);color:var(--ink);border-color:#8a939e}
.actions{display:flex;flex-wrap:wrap;gap:.5rem;align-items:center;margin:.75rem 0 0}
.chart{margin:0}
.chart .plot{display:grid;grid-template-columns:auto 1fr;grid-template-rows:auto auto;column-gap:.4rem}
.chart svg{width:100%;height:150px;display:block;overflow:visible}
.chart .y-axis{display:flex;flex-direction:column;justify-content:space-between;text-align:right;min-width:2.5rem}
.chart .x-axis{grid-column:2;display:flex;justify-content:space-between;gap:.5rem}
.chart .axis-label{color:var(--muted);font-size:.8rem;line-height:1.2;font-variant-numeric:tabular-nums;white-space:nowrap}
.chart .bar{fill:#2f7fd0}
.chart .now{fill:#8fbde9}
.chart .axis{stroke:#8a939e;stroke-width:1}
.chart .line{fill:none;stroke:#0b5cad;stroke-width:2}
.chart .range{fill:#2f7fd0;fill-opacity:.18}
.chart .normal{fill:var(--okbg)}
.chart .limit{stroke:var(--ok);stroke-width:1;stroke-dasharray:4 3}
.chart .dot{stroke:#0b5cad;stroke-width:6;stroke-linecap:round}
.charts{display:grid;gap:1rem;grid-template-columns:repeat(auto-fit,minmax(20rem,1fr))}
.charts h3{font-size:1rem;margin:0 0 .25rem}
.qr{background:#fff;padding:8px;border:1px solid var(--line);border-radius:6px;width:min(100%,320px)}
.qr svg{display:block;width:100%;height:auto}
.secret{display:flex;gap:.5rem;flex-wrap:wrap}
.secret input{flex:1 1 16rem}
.grid2{display:grid;gap:1rem;grid-template-columns:repeat(auto-fit,minmax(18rem,1fr))}
.trail{list-style:none;margin:0;padding:0}
.trail li{border-bottom:1px solid var(--line);padding:.5rem 0}
.trail li:first-child{padding-top:0}
.trail p{margin:0;overflow-wrap:anywhere}
.trail-body{display:flex;flex-wrap:wrap;gap:0 .9rem;font-size:.95rem}
.foot{max-width:72rem;margin:0 auto;padding:1rem;color:var(--muted);font-size:.85rem}
@media (max-width:40rem){
main{padding:.75rem}section,.card{padding:.75rem}
.scroll table,.scroll tbody,.scroll tr,.scroll td,.scroll tbody th{display:block;width:auto}
.scroll thead{position:absolute;width:1px;height:1px;overflow:hidden;clip-path:inset(50%);white-space:nowrap}
.scroll tr{border:1px solid var(--line);border-radius:6px;padding:.5rem .75rem;margin:0 0 .6rem}
.scroll tbody th{border:0;padding:0 0 .3rem;color:var(--ink);white-space:normal;overflow-wrap:anywhere}
.scroll td{display:flow-root;border:0;padding:.15rem 0 .15rem 7.5rem;overflow-wrap:anywhere;text-align:left}
.scroll td.num{text-align:left}
.scroll td[data-label]::before{content:attr(data-label);float:left;width:7rem;margin-left:-7.5rem;white-space:normal;color:var(--muted);font:600 .85rem/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;overflow-wrap:anywhere}
.scroll td:not([data-label]){padding-left:0}
dl.facts{grid-template-columns:minmax(6.5rem,38%) minmax(0,1fr)}
dl.facts.stacked{grid-template-columns:minmax(0,1fr);gap:0}
dl.facts.stacked dd{margin-bottom:.6rem}
}
`;
