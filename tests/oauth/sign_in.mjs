// A person signing in through oidc-provider's development pages, without a browser: follows the
// authorization request given as the first argument, fills in the login page (any login) and
// the consent page, and delivers the final redirect (the code) to its redirect URI, which is
// `orca login`'s loopback listener or orca's `/oauth/upstream/callback`. Cookies are kept by
// hand; fetch never follows redirects. LOGIN names the person (alice by default); DELIVER_COOKIE
// is the Cookie header of the delivery (the browser's binding cookie that orca set); DELIVER_TO
// (an origin) sends the delivery there instead, as a load balancer would send it to another
// replica; the delivery's status, its Location and the delivered URL are printed.
const start = process.argv[2];
const redirect = new URL(start).searchParams.get("redirect_uri");
const cookies = new Map();

function keep(response) {
  for (const line of response.headers.getSetCookie()) {
    const [pair] = line.split(";");
    const at = pair.indexOf("=");
    cookies.set(pair.slice(0, at).trim(), pair.slice(at + 1));
  }
}
const header = () => [...cookies].map(([name, value]) => `${name}=${value}`).join("; ");

let url = start;
let body;
for (let step = 0; step < 20; step += 1) {
  if (url.startsWith(redirect)) {
    if (process.env.DELIVER_TO) {
      const target = new URL(url);
      const to = new URL(process.env.DELIVER_TO);
      target.protocol = to.protocol;
      target.host = to.host;
      url = target.toString();
    }
    const headers = process.env.DELIVER_COOKIE ? { cookie: process.env.DELIVER_COOKIE } : {};
    const delivered = await fetch(url, { redirect: "manual", headers });
    console.log(`delivered ${delivered.status} ${delivered.headers.get("location") || "-"} ${url}`);
    process.exit(delivered.status < 400 ? 0 : 1);
  }
  const init = { redirect: "manual", headers: { cookie: header() } };
  if (body) {
    init.method = "POST";
    init.headers["content-type"] = "application/x-www-form-urlencoded";
    init.body = new URLSearchParams(body).toString();
  }
  const response = await fetch(url, init);
  keep(response);
  body = undefined;
  if (response.status >= 300 && response.status < 400) {
    url = new URL(response.headers.get("location"), url).toString();
    continue;
  }
  const html = await response.text();
  const action = html.match(/<form[^>]*action="([^"]+)"/);
  const prompt = html.match(/name="prompt" value="([^"]+)"/);
  if (!action || !prompt) {
    console.error(`unexpected page ${response.status} at ${url}:\n${html.slice(0, 2000)}`);
    process.exit(1);
  }
  url = new URL(action[1].replace(/&amp;/g, "&"), url).toString();
  body = prompt[1] === "login" ? { prompt: "login", login: process.env.LOGIN || "alice", password: "any" } : { prompt: prompt[1] };
}
console.error("too many steps");
process.exit(1);
