// The analysis page's parts that hold no state of its own: the JSON API's requests and the arrows' SVG.

// POST `body` (GET without one) to the server's `path`; its JSON answer. A 503 with Retry-After (the model
// compiling, a full queue) is retried after it, `onBusy` told why; any other error throws its message.
// A server started with --token is opened at /?token=...: the token is kept for the tab and sent with each call.
const TOKEN = new URLSearchParams(location.search).get('token') || sessionStorage.getItem('token')
if (TOKEN) sessionStorage.setItem('token', TOKEN)
const HEADERS = {'Content-Type': 'application/json', ...(TOKEN ? {Authorization: `Bearer ${TOKEN}`} : {})}

export async function request(path, body, onBusy) {
  for (;;) {
    const init = body === undefined ? {headers: HEADERS} : {method: 'POST', headers: HEADERS, body: JSON.stringify(body)}
    const response = await fetch(path, init)
    const value = await response.json()
    if (response.status === 503 && response.headers.get('Retry-After')) {
      onBusy(value.error || 'busy')
      await new Promise((resolve) => setTimeout(resolve, 1000 * Number(response.headers.get('Retry-After'))))
      continue
    }
    if (!response.ok) throw new Error(value.error || response.statusText)
    return value
  }
}

// The centre of `square` ('e4') on an 800 x 800 board seen from White (`white`) or Black.
function squareCentre(square, white) {
  const file = square.charCodeAt(0) - 97, rank = Number(square[1]) - 1
  return [100 * (white ? file : 7 - file) + 50, 100 * (white ? 7 - rank : rank) + 50]
}

// An arrow from `from` to `to` with `label` near its head, as SVG.
export function svgArrow(from, to, colour, width, label, white) {
  const [x1, y1] = squareCentre(from, white), [x2, y2] = squareCentre(to, white)
  const length = Math.hypot(x2 - x1, y2 - y1), ux = (x2 - x1) / length, uy = (y2 - y1) / length
  const head = 2.6 * width, ex = x2 - ux * head, ey = y2 - uy * head
  const px = -uy * head * 0.7, py = ux * head * 0.7
  return `<g opacity="0.8"><line x1="${x1}" y1="${y1}" x2="${ex}" y2="${ey}" stroke="${colour}" stroke-width="${width}"
    stroke-linecap="round"/><polygon points="${x2},${y2} ${ex + px},${ey + py} ${ex - px},${ey - py}" fill="${colour}"/>
    <text class="label" x="${ex - ux * 12}" y="${ey - uy * 12}">${label}</text></g>`
}
