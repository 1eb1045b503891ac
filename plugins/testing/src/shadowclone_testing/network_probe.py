"""What a clone with its network off can reach, as a probe run in it sees it: the tests of
every launcher that keeps a stranger's clone network-off run it (`python3 -c PROBE HOST
GITHUB_PORT MODEL_PORT TEXT HOST_IP [ADDRESS:PORT...]`), and read the JSON object it prints
last. Each ADDRESS:PORT is also tried directly (`direct_others`): the machines a launcher runs
clones on, their Docker APIs, whatever else must stay out of a stranger's reach."""

PING = "ping through the egress proxy"

PROBE = r"""
import base64, json, os, socket, sys, urllib.error, urllib.parse, urllib.request

host, github_port, model_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
host_ip = sys.argv[5]
others = [target.rsplit(":", 1) for target in sys.argv[6:]]
message = json.dumps({"model": "m", "max_tokens": 16, "stream": False,
                      "messages": [{"role": "user", "content": sys.argv[4]}]}).encode()
headers = {"content-type": "application/json", "x-api-key": "k",
           "anthropic-version": "2023-06-01"}

def connect(port, to=host):
    try:
        socket.create_connection((to, port), timeout=5).close()
        return "connected"
    except OSError as error:
        return f"failed: {error}"

egress = os.environ.get("SHADOWCLONE_EGRESS_PROXY")
parts = urllib.parse.urlsplit(egress or "")
relay = f"{parts.hostname}:{parts.port}" if egress else None

def fetch(url, data=None, proxy=egress):
    request = urllib.request.Request(url, data=data, headers=headers)
    handlers = [urllib.request.ProxyHandler({"http": proxy, "https": proxy} if proxy else {})]
    try:
        with urllib.request.build_opener(*handlers).open(request, timeout=15) as response:
            return {"status": response.status, "body": response.read().decode()[:300]}
    except urllib.error.HTTPError as error:
        return {"status": error.code, "body": error.read().decode()[:300]}
    except OSError as error:
        return {"error": str(error)}

def tunnel(port, password):
    # What a proxy-aware client does for any target: CONNECT, then speak HTTP inside.
    if not relay:
        return {"error": "no proxy"}
    proxy_host, proxy_port = relay.rsplit(":", 1)
    auth = ""
    if password is not None:
        basic = base64.b64encode(f"shadowclone:{password}".encode()).decode()
        auth = f"Proxy-Authorization: Basic {basic}\r\n"
    try:
        with socket.create_connection((proxy_host, int(proxy_port)), timeout=10) as s:
            s.sendall(
                f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n{auth}\r\n".encode()
            )
            answer = s.recv(4096).decode(errors="replace")
            if " 200 " not in answer.split("\r\n")[0]:
                return {"connect": answer.split("\r\n")[0]}
            s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                      + "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode()
                      + f"Content-Length: {len(message)}\r\n\r\n".encode() + message)
            data = b""
            while chunk := s.recv(65536):
                data += chunk
            return {"connect": answer.split("\r\n")[0],
                    "reply": data.decode(errors="replace").split("\r\n")[0]}
    except OSError as error:
        return {"error": str(error)}

no_token = f"http://{relay}" if relay else None
wrong = f"http://shadowclone:not-the-token@{relay}" if relay else None
print(json.dumps({
    "proxy": egress,
    "proxy_variables": sorted(k for k in os.environ if k.lower().endswith("_proxy")),
    "direct_github": connect(github_port),
    "direct_model": connect(model_port),
    "direct_github_ip": connect(github_port, host_ip),
    "github": fetch(f"http://{host}:{github_port}/api/v3/rate_limit"),
    "github_tls": fetch(f"https://{host}:{github_port}/api/v3/rate_limit"),
    "model": fetch(f"http://{host}:{model_port}/v1/messages", message),
    "model_tunnel": tunnel(model_port, parts.password),
    "github_tunnel": tunnel(github_port, parts.password),
    "model_no_token": fetch(f"http://{host}:{model_port}/v1/messages", message, no_token),
    "model_wrong_token": fetch(f"http://{host}:{model_port}/v1/messages", message, wrong),
    "tunnel_no_token": tunnel(model_port, None),
    "tunnel_wrong_token": tunnel(model_port, "not-the-token"),
    "direct_others": {f"{to}:{port}": connect(int(port), to) for to, port in others},
}))
"""
