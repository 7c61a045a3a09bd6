/**
 * The built-in tool sets' settings for unit tests that build a registry (`createRegistry`,
 * `createPromptRegistry`, `createResourceRegistry`): the defaults of DEMO_RESEARCH_PHASE_MS
 * (20 s) and TESTING_SIDE_EFFECT_DIR (unset), as the service passes them from its `Config`.
 */
import type { ToolsetSettings } from '@mcp-tasks/tools/internal';

export const SETTINGS: ToolsetSettings = { demo: { researchPhaseMs: 20_000 }, testing: {} };
