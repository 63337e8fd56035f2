import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { devKey, petsConfig, startTestGateway, writeConfigDir } from '../helpers/test-gateway.js';
import { useTempDirs } from '../helpers/temp-dirs.js';
import { httpsGet } from '../helpers/tls-cert.js';
import { startUpstream } from '../helpers/upstream.js';
import { anthropicTokens, openAiStreamTokens, startLlmUpstream } from '../helpers/llm-upstream.js';

/**
 * The code blocks in `language` of a section of a page (from its heading to the next of the same level
 * or above).
 */
function codeBlocks(page: string, heading: string, language = 'sh'): string[] {
  const text = readFileSync(page, 'utf8');
  const start = text.search(new RegExp(`^#+ ${heading.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`, 'm'));
  expect(start, `${page} has a heading "${heading}"`).toBeGreaterThan(-1);
  const level = /^#+/.exec(text.slice(start))![0].length;
  const rest = text.slice(start + level);
  const end = rest.search(new RegExp(`^#{1,${level}} `, 'm'));
  const section = end === -1 ? rest : rest.slice(0, end);
  // A block in a list item is indented as the item is.
  const fence = new RegExp(`^( *)\`\`\`${language}\n([\\s\\S]*?)^\\1\`\`\``, 'gm');
  return [...section.matchAll(fence)].map(([, indent, block]) =>
    block!.replace(new RegExp(`^${indent}`, 'gm'), ''),
  );
}

const hasOpenssl = (() => {
  try {
    execFileSync('openssl', ['version']);
    return true;
  } catch {
    return false;
  }
})();

/** The recipes a new user copies from the docs, run as written: what they make is what the gateway takes. */
describe('recipes of the documentation', () => {
  const tempDirs = useTempDirs('quotagate-recipes-');

  it("docs/admin-api.md's key recipe makes an application key the config takes", async () => {
    const [recipe] = codeBlocks('docs/admin-api.md', 'Giving an application a key')
      .flatMap((block) => block.split('\n'))
      .filter((line) => line.startsWith('node -p'));
    expect(recipe).toBeDefined();
    const key = execFileSync('sh', ['-c', recipe!], { encoding: 'utf8' }).trim();
    expect(key).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const dir = writeConfigDir(
      petsConfig('http://127.0.0.1:9', {
        applications: [
          { id: '0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e', name: 'Mobile', apikey_development: key },
        ],
      }),
    );
    tempDirs.removeAfter(dir);
    const { config } = await loadConfig({ configDir: dir, env: {} });
    expect(config.applications[0]?.apikey_development).toBe(key);
  });

  it.runIf(hasOpenssl)(
    "docs/authentication.md's self-signed TLS recipe makes a pair the gateway serves apikey with",
    async () => {
      const [recipe] = codeBlocks('docs/authentication.md', '`apikey`').filter((block) =>
        block.includes('openssl req'),
      );
      expect(recipe).toBeDefined();
      const project = tempDirs.make();
      execFileSync('sh', ['-e', '-c', recipe!], { cwd: project, stdio: 'pipe' });
      const keyFile = path.join(project, 'conf/tls/key.pem');
      const certFile = path.join(project, 'conf/tls/cert.pem');
      expect(existsSync(keyFile) && existsSync(certFile)).toBe(true);

      const upstream = await startUpstream();
      const gateway = await startTestGateway(
        petsConfig(upstream.url, {
          APIKeyAuthType: 'apikey',
          port: false,
          tls: { port: 0, key: keyFile, cert: certFile },
        }),
      );
      try {
        // As the page's curl does: the certificate is its own CA, and names localhost.
        const { status } = await httpsGet(gateway.running.ports.https, '/pets/1', {
          ca: readFileSync(certFile),
          headers: { apikey: devKey },
          servername: 'localhost',
        });
        expect(status).toBe(200);
      } finally {
        await gateway.close();
        await upstream.close();
      }
    },
  );

  it("docs/quotas.md's configs limit an OpenAI-compatible server and Anthropic's Messages API by tokens", async () => {
    const blocks = codeBlocks('docs/quotas.md', 'Limiting an LLM API by tokens', 'js');
    expect(blocks).toHaveLength(2);
    const upstream = await startLlmUpstream();
    const calls = [
      { path: '/v1/chat/completions', tokens: openAiStreamTokens },
      { path: '/anthropic/v1/messages', tokens: anthropicTokens },
    ];
    try {
      for (const [index, block] of blocks.entries()) {
        const module = { exports: {} as { apis: Array<{ upstream: string }>; quotas: unknown[] } };
        vm.runInNewContext(block, { module });
        const { apis, quotas } = module.exports;
        // The page's upstream, at this test's origin.
        const api = { ...apis[0]!, upstream: apis[0]!.upstream.replace(/^https?:\/\/[^/]+/, upstream.url) };
        const gateway = await startTestGateway(petsConfig(upstream.url, { apis: [api], quotas }));
        try {
          const auth = { authorization: `Basic ${Buffer.from(`${devKey}:`).toString('base64')}` };
          const answer = await fetch(`${gateway.url}${calls[index]!.path}`, {
            method: 'POST',
            headers: { ...auth, 'content-type': 'application/json' },
            body: JSON.stringify({ stream: true, stream_options: { include_usage: true } }),
          });
          expect(answer.status).toBe(200);
          await answer.text();
          const usedOfTokens = async () => {
            const usage = (await (
              await fetch(`${gateway.url}/_quotagate/usage`, { headers: auth })
            ).json()) as {
              restrictions: Array<{ type: string; used: number }>;
            };
            return usage.restrictions.find((restriction) => restriction.type === 'throttleunits')?.used;
          };
          await expect.poll(usedOfTokens).toBe(calls[index]!.tokens);
        } finally {
          await gateway.close();
        }
      }
    } finally {
      await upstream.close();
    }
  });
});
